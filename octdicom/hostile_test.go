package octdicom

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"octflow/imaging"
	"octflow/octdicom/hostile"
)

// TestHostileFilesAreRefusedWithBoundedMemory reads every hostile file
// and wants each refused as an invalid volume, without a crash and
// without the reader allocating more than a few times the file's size.
// Each is first to be refused by the pre-scan alone, which allocates
// nothing the file declares: a pre-scan that lets one through fails
// here, before the parser could take the process down with it.
func TestHostileFilesAreRefusedWithBoundedMemory(t *testing.T) {
	for _, f := range hostile.Files() {
		t.Run(f.Name, func(t *testing.T) {
			if _, err := PreScan(bytes.NewReader(f.Data), int64(len(f.Data))); !errors.Is(err, imaging.ErrInvalidVolume) {
				t.Fatalf("the pre-scan let through %s (%v): the parser would be the first to read it", f.Attack, err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, _, err := ReadDICOM(bytes.NewReader(f.Data), int64(len(f.Data)))
			runtime.ReadMemStats(&after)
			if !errors.Is(err, imaging.ErrInvalidVolume) {
				t.Fatalf("%s: got %v, want an invalid volume", f.Attack, err)
			}
			allocated := after.TotalAlloc - before.TotalAlloc
			if limit := uint64(4*len(f.Data)) + 16<<20; allocated > limit {
				t.Errorf("refusing %d bytes allocated %d MB, want under %d MB", len(f.Data), allocated>>20, limit>>20)
			}
			t.Logf("%s: %v (%d KB read, %d KB allocated)", f.Name, err, len(f.Data)>>10, allocated>>10)
		})
	}
}
