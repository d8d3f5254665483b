package devstack

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
)

// visibilityIndexColumns are the columns of executions_visibility whose
// indexes the embedded stack keeps besides those of octflow's own search
// attributes: the Web UI's default list (namespace, close and start time)
// and its filters by workflow ID, type, status, task queue and execution
// time, and TemporalNamespaceDivision, which the server adds to every
// list query to leave out its internal workflows.
var visibilityIndexColumns = []string{"execution_time", "workflow_id", "workflow_type_name", "status", "task_queue",
	"TemporalNamespaceDivision"}

// indexedColumn reads the column an index of the visibility table is on:
// the one after namespace_id.
var indexedColumn = regexp.MustCompile(`ON\s+executions_visibility\s*\(\s*namespace_id\s*,\s*([A-Za-z0-9_]+)\s*,`)

// trimVisibilityIndexes drops the indexes of the visibility table that
// no query of the embedded stack uses. Temporal's SQLite schema indexes
// every column a search attribute may be stored in (about 60 indexes);
// a visibility record is written with REPLACE, so each write of an
// exam's state updated every one of them twice, and compiling that
// statement cost as much again. Queries on a column whose index is gone
// still work, by a scan. attrColumns are the columns octflow's search
// attributes are stored in.
func trimVisibilityIndexes(ctx context.Context, file string, attrColumns []string) error {
	db, err := sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("open %s: %w", file, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_master
		WHERE type = 'index' AND tbl_name = 'executions_visibility' AND sql IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("list visibility indexes: %w", err)
	}
	var drop []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			rows.Close()
			return fmt.Errorf("list visibility indexes: %w", err)
		}
		m := indexedColumn.FindStringSubmatch(def)
		if m == nil || slices.Contains(visibilityIndexColumns, m[1]) || slices.Contains(attrColumns, m[1]) {
			continue // the default list's index, or one a query uses
		}
		drop = append(drop, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list visibility indexes: %w", err)
	}
	for _, name := range drop {
		if _, err := db.ExecContext(ctx, `DROP INDEX "`+name+`"`); err != nil {
			return fmt.Errorf("drop visibility index %s: %w", name, err)
		}
	}
	return nil
}
