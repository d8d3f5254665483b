package activities

import (
	"context"
	"errors"
	"slices"

	"octflow/exam"
	"octflow/octdicom/results"
	"octflow/storage"
)

// exportsRecord is what an exam's exports sent to the PACS, run by run
// (exam.ExportsKey): the run of each report exported, in the order they
// were first sent, with the references of its objects. A run's results
// replace those of every run recorded before it (superseded): they name
// them as predecessors and reject them. A run is recorded before its
// objects are sent, so that whatever may have reached the PACS (a send
// whose answer was lost, an object a PACS kept of a refused request) is
// replaced by the next run's. It holds octflow's own UIDs only: no
// patient identifier, not even the study's, which the sealed identity
// gives at each export.
type exportsRecord struct {
	Runs []exportedRun `json:"runs"`
}

// exportedRun is one run's results as its exports sent them.
type exportedRun struct {
	// Run is the report's run (report.Report.Run).
	Run     string              `json:"run"`
	Objects []results.Reference `json:"objects"`
}

// readExports reads an exam's exportsRecord: empty for an exam none of
// whose exports has sent anything yet.
func readExports(ctx context.Context, store objects, ref exam.Ref) (exportsRecord, error) {
	var r exportsRecord
	err := store.getJSON(ctx, exam.ExportsKey(ref), &r)
	if errors.Is(err, storage.ErrNotFound) {
		return exportsRecord{}, nil
	}
	return r, err
}

// superseded is what run's results replace: the runs recorded before it,
// the same on every try of its export, and their results (rejection notes
// are not rejected again).
func (r exportsRecord) superseded(run string) results.Superseded {
	var s results.Superseded
	for _, e := range r.Runs {
		if e.Run == run {
			break
		}
		s.Runs++
		for _, o := range e.Objects {
			if o.Kind != results.KindRejection {
				s.Objects = append(s.Objects, o)
			}
		}
	}
	return s
}

// keep records that run sends objs, unless the record says so already:
// a run's entry gains the objects it had not recorded (another build's),
// and loses none.
func (r exportsRecord) keep(ctx context.Context, store objects, ref exam.Ref, run string, objs []results.Object) error {
	r.Runs = slices.Clone(r.Runs) // the caller's record stays as it was read
	i := slices.IndexFunc(r.Runs, func(e exportedRun) bool { return e.Run == run })
	if i < 0 {
		r.Runs = append(r.Runs, exportedRun{Run: run})
		i = len(r.Runs) - 1
	}
	e := &r.Runs[i]
	e.Objects = slices.Clone(e.Objects)
	changed := false
	for _, o := range objs {
		if !slices.ContainsFunc(e.Objects, func(x results.Reference) bool { return x.SOPInstanceUID == o.SOPInstanceUID }) {
			e.Objects, changed = append(e.Objects, o.Reference()), true
		}
	}
	if !changed {
		return nil
	}
	return store.putJSON(ctx, exam.ExportsKey(ref), r)
}
