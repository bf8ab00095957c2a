package wal

// Helpers the tests use, kept out of the package's API.

// Append is Write followed by SyncTo.
func (l *Log) Append(typ byte, payload []byte) (Pos, error) {
	pos, err := l.Write(typ, payload)
	if err != nil {
		return Pos{}, err
	}
	if err := l.SyncTo(pos); err != nil {
		return Pos{}, err
	}
	return pos, nil
}

// Dir returns the directory of the log.
func (l *Log) Dir() string { return l.dir }
