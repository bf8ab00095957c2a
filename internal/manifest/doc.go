// Package manifest owns strata's manifest: the file that names the live
// state of a database, and the versions, edits and references it
// describes. manifest.go holds the on-disk format; version.go the live set
// of segments (Version, Handle), how an edit makes the next one, the
// references that keep a segment file open and on disk while a reader
// needs it, and the file-number allocator (Files) whose numbers the
// manifest records. The engine decides when to edit, installs a version
// beside its memtables and removes files through its filesystem: this
// package does no I/O but Write.
package manifest
