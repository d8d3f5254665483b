package devstack

import (
	"path/filepath"
	"testing"
	"time"

	sqliteschema "go.temporal.io/server/schema/sqlite"

	"octflow/exam"
)

func TestANewDataDirKeepsVisibilityInItsOwnFileAnOldOneWhereItWas(t *testing.T) {
	for _, c := range []struct {
		name        string
		old         bool // a data dir from before visibility had a file of its own
		wantOwnFile bool
	}{
		{"new data dir", false, true},
		{"data dir from before", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := temporalOptions{databaseFile: filepath.Join(dir, "temporal.db"), namespace: "default",
				retention: 24 * time.Hour, searchAttributes: exam.SearchAttributeTypes()}
			if c.old {
				// What older versions made: one file with both schemas.
				if err := sqliteschema.SetupSchema(sqliteConfig(opts.databaseFile)); err != nil {
					t.Fatal(err)
				}
			}
			for start := range 2 { // a restart finds the same layout
				store, vis, err := prepareSQLite(opts)
				if err != nil {
					t.Fatal(err)
				}
				if own := vis.DatabaseName != store.DatabaseName; own != c.wantOwnFile {
					t.Fatalf("start %d: visibility in %s, store in %s: own file %v, want %v",
						start+1, vis.DatabaseName, store.DatabaseName, own, c.wantOwnFile)
				}
				if gone, _ := missing(vis.DatabaseName); gone {
					t.Fatalf("start %d: %s was not created", start+1, vis.DatabaseName)
				}
			}
		})
	}
}
