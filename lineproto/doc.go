// Package lineproto ingests InfluxDB line protocol into a strata database in
// process, with InfluxDB's partial-write semantics: every valid line is
// written, every invalid line is reported with its line number, and one bad
// line never costs the good lines around it.
//
// # What is accepted
//
// One entry per line, in the form
//
//	measurement[,tag=value...] field=value[,field=value...] [timestamp]
//
// parsed with the decoder of github.com/influxdata/line-protocol/v2, which
// InfluxDB uses: a line is accepted or rejected exactly as that decoder
// (with its NextField and Time) accepts or rejects it, with one exception
// (duplicate tag keys, below). FuzzConformance checks this line by line.
//
//   - Field values are floats (1, -1.5, 1e-3: a number without a suffix is a
//     float, so v=1 is the float 1), signed integers with an i suffix (-42i),
//     unsigned integers with a u suffix (42u), booleans (t, T, true, True,
//     TRUE, f, F, false, False, FALSE) and double-quoted strings. Numbers are
//     read as strconv reads them, as the decoder does: floats may be
//     hexadecimal (0x1p-3) and digits may be separated by underscores
//     (1_000); NaN and infinities are rejected, as are numbers outside the
//     range of their kind. A bad value rejects its line.
//   - Escapes: "\," and "\ " in the measurement; "\,", "\=" and "\ " in tag
//     keys, tag values and field keys; "\"" and "\\" (and "\n", "\r", "\t",
//     which the decoder turns into the control characters) in string values.
//     A backslash before any other byte is kept as is. A string value may also
//     contain raw newlines: such an entry spans several lines.
//   - Names and string values must be valid UTF-8. Every point handed to
//     the DB passes point.Validate, the engine's own check: the decoder
//     already rules out empty names, control bytes and lines without
//     fields, and Write rejects duplicate tag keys itself.
//   - Duplicate field keys in one line: the last value wins, as in InfluxDB,
//     so cpu v=1,v=2i writes the integer 2. Duplicate tag keys are an error
//     (the decoder passes them; the data model has one value per tag key).
//   - Blank lines (only spaces, and a carriage return before the newline)
//     and comment lines (spaces, then '#', then printable bytes) are skipped
//     and not counted. Leading spaces are ignored, and so are trailing ones
//     after the fields or the timestamp. A tab is not a blank: a line that
//     starts with one is rejected, and so is a comment line that holds a tab
//     or another control byte.
//   - A carriage return ends a line only right before its newline (CRLF) or
//     at the end of the input. Anywhere else outside a string value it
//     rejects the line. (The decoder then reads a second, rejected entry from
//     the carriage return on; when that is on a later line than the entry's
//     start, because a string value spans lines, that line is rejected too.)
//
// # Timestamps
//
// A timestamp is a decimal integer in units of Options.Precision
// (nanoseconds by default; microseconds, milliseconds or seconds), scaled to
// Unix nanoseconds: at Second precision, 1 is stored as 1e9. A timestamp
// whose scaled value does not fit in an int64 rejects its line. A line
// without a timestamp takes Options.Now, truncated to the precision, read once
// per batch, so every such line of one db.Write call has the same time.
//
// # Line numbers and bad lines
//
// Lines are numbered from 1 by physical line of the input (newline bytes),
// counting blank and comment lines. An entry whose quoted string value
// contains newlines counts as one entry and is numbered where it starts. An
// entry longer than Options.MaxLineBytes is rejected alone and reading resumes
// after the newline that ends the line where the limit was crossed.
//
// Every invalid entry is counted in Result.RejectedCount and the first
// Options.MaxRejected of them (100 by default) are kept in Result.Rejected,
// in line order, as *LineError values giving the line number and the reason:
// a syntax error (with its column when the entry is one line), a value out
// of range, a point that fails validation, or a point the DB refused. Parser rejections match base.ErrInvalid
// (engine.ErrInvalid) with errors.Is. The DB's Write is atomic; when it
// refuses a point with a *base.PointError (wrapping ErrInvalid,
// ErrFieldTypeConflict or ErrSeriesLimit: a new series past the DB's
// series limit), that point's line is rejected and the rest of the
// batch is written again without it, so a kind conflict with an earlier line
// of the same batch or with stored data costs only the conflicting line. Any
// other error from the DB is a failure: Write returns it, and the points of
// earlier batches stay written.
//
// # Mapping
//
// One line is one point: its measurement, its tags in the order written, its
// fields (after dropping duplicates) and its time. Result.Lines counts the
// entries read, Result.Points the points written; Lines == Points +
// RejectedCount when Write returns a nil error or the context's error.
//
// # Batches, idle input and cancellation
//
// Points go to the DB in batches of Options.BatchSize. An entry is complete
// once its newline (or the end of the input) is read; a complete entry waits
// at most Options.Linger (1s by default) in a batch that is not full, so
// lines trickling in from a pipe or a socket are written soon even though the
// input stays open. Cancelling the context stops Write at once, even while it
// waits for input: it writes every complete entry it has read, drops only an
// unfinished one, and returns the context's error. Memory is bounded by the
// batch, a read buffer and MaxRejected, never by the input.
package lineproto
