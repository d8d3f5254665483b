package activities_test

import (
	"fmt"

	"octflow/activities"
)

// The pipeline every exam runs, in order, and where each stage runs: the
// four image stages on the GPU nodes' queue, report and notify on CPU
// workers; three of them may run a served model.
func ExamplePipeline() {
	for _, s := range activities.Pipeline() {
		fmt.Printf("%-8s %-17s queue %-7s GPU %-5t model %q\n", s.Spec.Stage, s.Spec.Activity, s.Spec.Queue(), s.Spec.GPU, s.Spec.Model)
	}
	// Output:
	// denoise  Denoise           queue oct-gpu GPU true  model "DENOISE"
	// layers   SegmentLayers     queue oct-gpu GPU true  model "LAYERS"
	// lesions  MarkLesions       queue oct-gpu GPU true  model "LESIONS"
	// measure  Measure           queue oct-gpu GPU true  model ""
	// report   RenderReport      queue oct-cpu GPU false model ""
	// notify   NotifyWorkstation queue oct-cpu GPU false model ""
}
