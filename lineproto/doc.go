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
// parsed with the decoder of github.com/influxdata/line-protocol/v2:
//
//   - Field values are floats (1, -1.5, 1e-3: a number without a suffix is a
//     float, so v=1 is the float 1), signed integers with an i suffix (-42i),
//     unsigned integers with a u suffix (42u), booleans (t, T, true, True,
//     TRUE, f, F, false, False, FALSE) and double-quoted strings. Floats are
//     decimal (digits, '.', an exponent); hexadecimal forms, NaN and Inf are
//     rejected, as are numbers outside the range of their kind.
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
//     so cpu v=1,v=2i writes the integer 2. Duplicate tag keys are an error.
//   - Blank lines (only spaces, tabs and carriage returns) and comment lines
//     (whose first non-blank byte is '#') are skipped and not counted.
//     Leading and trailing spaces and tabs are ignored, and a CR before the
//     newline (CRLF line endings) is dropped.
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
// Every invalid entry becomes a *LineError in Result.Rejected, in line order,
// giving its number and the reason: a syntax error (with its column when the
// entry is one line), a value out of range, a point that fails validation, or
// a point the DB refused. Parser rejections match base.ErrInvalid
// (engine.ErrInvalid) with errors.Is. The DB's Write is atomic; when it
// refuses a point with a *base.PointError (wrapping ErrInvalid or
// ErrFieldTypeConflict), that point's line is rejected and the rest of the
// batch is written again without it, so a kind conflict with an earlier line
// of the same batch or with stored data costs only the conflicting line. Any
// other error from the DB is a failure: Write returns it, and the points of
// earlier batches stay written.
//
// # Mapping
//
// One line is one point: its measurement, its tags in the order written, its
// fields (after dropping duplicates) and its time. Result.Lines counts the
// entries read, Result.Points the points written; when Write returns a nil
// error, Lines == Points + len(Rejected).
package lineproto
