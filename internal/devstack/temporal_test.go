package devstack

import (
	"database/sql"
	"path/filepath"
	"regexp"
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

// TestANewVisibilityStoreIndexesWhatIsQueried: a new data dir's
// visibility table keeps the default list's index and those of the
// columns queries use (octflow's search attributes among them) and no
// other; a list by a column whose index is gone still answers.
func TestANewVisibilityStoreIndexesWhatIsQueried(t *testing.T) {
	opts := temporalOptions{databaseFile: filepath.Join(t.TempDir(), "temporal.db"), namespace: "default",
		retention: 24 * time.Hour, searchAttributes: exam.SearchAttributeTypes()}
	_, vis, err := prepareSQLite(opts)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+vis.DatabaseName)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	indexed := map[string]bool{} // column after namespace_id → has an index
	var defaultList bool
	rows, err := db.Query(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility' AND sql IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		if m := indexedColumn.FindStringSubmatch(def); m != nil {
			indexed[m[1]] = true
		} else if name == "default_idx" {
			defaultList = true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !defaultList {
		t.Error("the default list's index is gone")
	}
	var slots []string // custom search attribute columns with an index
	for column := range indexed {
		if customSlot.MatchString(column) {
			slots = append(slots, column)
		}
	}
	if len(slots) != len(exam.SearchAttributeTypes()) {
		t.Errorf("search attribute columns indexed: %v, want one per octflow search attribute (%d)", slots, len(exam.SearchAttributeTypes()))
	}
	for _, c := range visibilityIndexColumns {
		if !indexed[c] {
			t.Errorf("no index on %s", c)
		}
	}
	for _, c := range []string{"history_length", "Bool01", "Int01", "Double01", "Datetime01", "TemporalPauseInfo", "BatcherUser"} {
		if indexed[c] {
			t.Errorf("%s is still indexed", c)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM executions_visibility WHERE Bool01 = 1`).Scan(&n); err != nil {
		t.Errorf("a query on an unindexed column: %v", err)
	}
}

// customSlot matches the columns Temporal's SQL schema keeps for custom
// search attributes.
var customSlot = regexp.MustCompile(`^(Bool|Datetime|Double|Int|Keyword|KeywordList|Text)\d\d$`)
