package engine

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults for the zero fields of Options.
const (
	DefaultSyncInterval          = 100 * time.Millisecond
	DefaultMemTableBytes         = 64 << 20
	DefaultWALSegmentBytes       = 64 << 20
	DefaultBlockSamples          = 1000
	DefaultMaxImmutableMemTables = 2
	DefaultL0CompactionTrigger   = 4
	DefaultL0StopWritesTrigger   = 12
	DefaultLevelMultiplier       = 10
	DefaultL1TargetBytes         = 64 << 20
	DefaultTargetSegmentBytes    = 64 << 20
)

// DefaultOptions returns the options that a nil *Options stands for.
func DefaultOptions() *Options {
	o := &Options{}
	o.EnsureDefaults()
	return o
}

// Clone returns a copy of o; a nil o gives a zero Options.
func (o *Options) Clone() *Options {
	if o == nil {
		return &Options{}
	}
	c := *o
	return &c
}

// EnsureDefaults replaces every zero field with its default.
func (o *Options) EnsureDefaults() {
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.WALSegmentBytes == 0 {
		o.WALSegmentBytes = DefaultWALSegmentBytes
	}
	if o.BlockSamples == 0 {
		o.BlockSamples = DefaultBlockSamples
	}
	if o.MaxImmutableMemTables == 0 {
		o.MaxImmutableMemTables = DefaultMaxImmutableMemTables
	}
	if o.L0CompactionTrigger == 0 {
		o.L0CompactionTrigger = DefaultL0CompactionTrigger
	}
	if o.L0StopWritesTrigger == 0 {
		o.L0StopWritesTrigger = max(DefaultL0StopWritesTrigger, 3*o.L0CompactionTrigger)
	}
	if o.LevelMultiplier == 0 {
		o.LevelMultiplier = DefaultLevelMultiplier
	}
	if o.L1TargetBytes == 0 {
		o.L1TargetBytes = DefaultL1TargetBytes
	}
	if o.TargetSegmentBytes == 0 {
		o.TargetSegmentBytes = DefaultTargetSegmentBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports options that cannot work. It expects EnsureDefaults first.
func (o *Options) Validate() error {
	switch {
	case o.Sync < SyncAlways || o.Sync > SyncNever:
		return fmt.Errorf("%w: unknown sync mode %d", ErrInvalid, int(o.Sync))
	case o.SyncInterval < 0:
		return fmt.Errorf("%w: negative SyncInterval", ErrInvalid)
	case o.MemTableBytes < 0:
		return fmt.Errorf("%w: negative MemTableBytes", ErrInvalid)
	case o.Retention < 0:
		return fmt.Errorf("%w: negative Retention", ErrInvalid)
	case o.WALSegmentBytes < 0:
		return fmt.Errorf("%w: negative WALSegmentBytes", ErrInvalid)
	case o.BlockSamples < 1 || o.BlockSamples > 1<<16:
		return fmt.Errorf("%w: BlockSamples %d out of [1, 65536]", ErrInvalid, o.BlockSamples)
	case o.MaxImmutableMemTables < 1:
		return fmt.Errorf("%w: MaxImmutableMemTables must be at least 1", ErrInvalid)
	case o.L0CompactionTrigger < 1:
		return fmt.Errorf("%w: L0CompactionTrigger must be at least 1", ErrInvalid)
	case o.L0StopWritesTrigger <= o.L0CompactionTrigger:
		return fmt.Errorf("%w: L0StopWritesTrigger must exceed L0CompactionTrigger", ErrInvalid)
	case o.LevelMultiplier < 2:
		return fmt.Errorf("%w: LevelMultiplier must be at least 2", ErrInvalid)
	case o.L1TargetBytes < 1 || o.TargetSegmentBytes < 1:
		return fmt.Errorf("%w: level and segment targets must be positive", ErrInvalid)
	}
	return nil
}
