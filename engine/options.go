package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/stratadb/strata/compaction"
	"github.com/stratadb/strata/segment"
)

// Defaults for the zero fields of Options. The block and level defaults
// are the segment and compaction packages' own, so there is one source for
// each.
const (
	DefaultSyncInterval          = 100 * time.Millisecond
	DefaultMemTableBytes         = 64 << 20
	DefaultWALSegmentBytes       = 64 << 20
	DefaultBlockSamples          = segment.DefaultBlockSamples
	DefaultMaxImmutableMemTables = 2
	DefaultL0CompactionTrigger   = compaction.DefaultL0Trigger
	DefaultL0StopWritesTrigger   = 12
	DefaultLevelMultiplier       = compaction.DefaultMultiplier
	DefaultL1TargetBytes         = compaction.DefaultL1TargetBytes
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
	case o.MaxDiskBytes < 0:
		return fmt.Errorf("%w: negative MaxDiskBytes", ErrInvalid)
	case o.MaxSeries < 0:
		return fmt.Errorf("%w: negative MaxSeries", ErrInvalid)
	case o.MaxSeriesPerMeasurement < 0:
		return fmt.Errorf("%w: negative MaxSeriesPerMeasurement", ErrInvalid)
	case o.WALSegmentBytes < 0:
		return fmt.Errorf("%w: negative WALSegmentBytes", ErrInvalid)
	case o.BlockSamples < 1 || o.BlockSamples > segment.MaxBlockSamples:
		return fmt.Errorf("%w: BlockSamples %d out of [1, %d]", ErrInvalid, o.BlockSamples, segment.MaxBlockSamples)
	case o.MaxImmutableMemTables < 1:
		return fmt.Errorf("%w: MaxImmutableMemTables must be at least 1", ErrInvalid)
	case o.L0CompactionTrigger < 1:
		return fmt.Errorf("%w: L0CompactionTrigger must be at least 1", ErrInvalid)
	case o.L0StopWritesTrigger <= o.L0CompactionTrigger:
		return fmt.Errorf("%w: L0StopWritesTrigger must exceed L0CompactionTrigger", ErrInvalid)
	case o.TargetSegmentBytes < 1:
		return fmt.Errorf("%w: TargetSegmentBytes must be positive", ErrInvalid)
	}
	if _, err := compileRules(o.RetentionRules, o.Retention); err != nil {
		return err
	}
	if _, err := compileRollups(o.Rollups); err != nil {
		return err
	}
	// The level options are the compaction policy's: it says what it accepts.
	return o.policy().Validate()
}

// policy is the compaction policy the options describe.
func (o *Options) policy() compaction.Policy {
	return compaction.Policy{
		L0Trigger:     o.L0CompactionTrigger,
		Multiplier:    o.LevelMultiplier,
		L1TargetBytes: o.L1TargetBytes,
		MaxLevels:     maxLevels,
	}
}
