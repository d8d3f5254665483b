// Package imaging holds octflow's OCT image model and the four image
// stages that run on GPU nodes: denoise, retinal layer segmentation,
// lesion marking and measurement, and draws synthetic macular cubes
// (phantoms) with known ground truth for tests and demos. It knows
// nothing of DICOM: package octdicom reads scans into its Volume and
// writes them.
//
// The algorithms are pure Go and run on the CPU; a GPU node runs them
// while it holds a GPU slot, and a site may later swap a stage for a
// trained model. Nothing here talks to Temporal or the object store.
package imaging
