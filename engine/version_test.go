package engine

import (
	"bytes"
	"fmt"
)

// checkLevels reports the first break of the level invariants of v: a
// segment whose first key is after its last, or, in a level >= 1, two
// segments out of key order or whose key ranges overlap.
func checkLevels(v *version) error {
	for l, level := range v.Levels {
		for i, h := range level {
			if bytes.Compare(h.Meta.FirstKey, h.Meta.LastKey) > 0 {
				return fmt.Errorf("L%d segment %d: first key %q after last key %q", l, h.FileNum, h.Meta.FirstKey, h.Meta.LastKey)
			}
			if l == 0 || i == 0 {
				continue
			}
			if a := level[i-1]; bytes.Compare(a.Meta.LastKey, h.Meta.FirstKey) >= 0 {
				return fmt.Errorf("L%d segments %d [%q, %q] and %d [%q, %q] overlap or are out of order",
					l, a.FileNum, a.Meta.FirstKey, a.Meta.LastKey, h.FileNum, h.Meta.FirstKey, h.Meta.LastKey)
			}
		}
	}
	return nil
}
