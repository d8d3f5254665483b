// Package imaging holds octflow's OCT image model and the four image
// stages that run on GPU nodes: denoise, retinal layer segmentation,
// lesion marking and measurement, and draws synthetic macular cubes
// (phantoms) with known ground truth for tests and demos. It knows
// nothing of DICOM: package octdicom reads scans into its Volume and
// writes them.
//
// # A tour
//
// A [Volume] is a scan: B-scans (frames) of A-scans (columns) of depth
// samples (rows), linear reflectivity, with its spacing in µm and its
// scan [Pattern] (a macular cube, a line, a peripapillary circle).
// [Denoise] smooths it; [SegmentLayers] finds the retinal boundaries
// (ILM to Bruch's membrane) in every A-scan as [Layers]; [MarkLesions]
// marks fluid and drusen between them; [Analyze] grades the scan
// ([Quality]: full, partial or ungradable, A-scan by A-scan), judges how
// reliable each boundary is where a figure needs it, and measures what
// the pattern allows. Its [Analysis] carries the scan's [Figures] — a
// cube's [Measurements] (ETDRS subfields, central subfield thickness,
// volume), a line's [LineMeasurements] or a circle's [RNFLMeasurements]
// — and lists every figure it withholds with the reason: no number is
// reported from a boundary the image does not show reliably.
//
// [NewPhantom] draws a cube with known boundaries and lesions; the
// package Example runs it through every stage. The degradation suite
// (degradation_suite_test.go) measures every figure under noise, weak
// signal, blur, shadows, motion, clipping and mirror artefacts against
// the clean truth, and docs/imaging.md holds its calibration tables.
//
// The algorithms are pure Go and run on the CPU; a GPU node runs them
// while it holds a GPU slot, and a site may later swap a stage for a
// trained model. Nothing here talks to Temporal or the object store.
package imaging
