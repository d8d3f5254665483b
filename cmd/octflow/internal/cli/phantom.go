package cli

import (
	"context"
	"flag"
	"fmt"
	"os"

	"octflow/imaging"
	"octflow/octdicom"
)

// runPhantom writes a synthetic macular cube as an Ophthalmic Tomography
// DICOM file.
func runPhantom(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("phantom", flag.ContinueOnError)
	out := fs.String("out", "exam.dcm", "output DICOM file")
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives the same cube")
	frames := fs.Int("frames", 49, "B-scans (128 with --rows 1024 is the other common cube)")
	rows := fs.Int("rows", 496, "samples per A-scan over 1.92 mm of depth")
	cols := fs.Int("cols", 512, "A-scans per B-scan")
	eye := fs.String("eye", "OD", "laterality: OD or OS")
	fluid := fs.Bool("fluid", false, "add an intraretinal and a subretinal fluid pocket")
	drusen := fs.Bool("drusen", false, "add drusen (the RPE raised over deposits on Bruch's membrane)")
	truthPath := fs.String("truth", "", "also write the ground truth (report schema plus exact boundaries) as JSON here")
	exportName := fs.String("export", string(imaging.ExportLinear16),
		"how the levels are stored, as devices do: linear16 (16-bit raw), log8 (8-bit, 40 dB log) or pow8 (8-bit 255·v^0.25)")
	lookName := fs.String("look", "", "draw it as another device's images look: fine-axial, curved, jpeg90, "+
		"or unaveraged and jpeg75, which octflow does not yet measure (docs/imaging.md, Other devices' looks); fine-axial sets --rows 1024")
	if err := fs.Parse(args); err != nil {
		return err
	}
	export, err := imaging.ParseExport(*exportName)
	if err != nil {
		return err
	}
	look, err := imaging.ParseLook(*lookName)
	if err != nil {
		return err
	}
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: *seed, Frames: *frames, Rows: *rows, Cols: *cols,
		Laterality: *eye, Fluid: *fluid, Drusen: *drusen, Look: look})
	levels, bits, err := look.Export(p.Volume, export)
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	uid := fmt.Sprintf("2.25.%d", 1_000_000+*seed)
	h := octdicom.Header{SOPInstanceUID: uid + ".3", StudyInstanceUID: uid + ".1", SeriesInstanceUID: uid + ".2",
		PatientID: fmt.Sprintf("PHANTOM-%d", *seed), Bits: bits, Description: "octflow phantom, macular cube"}
	if err := octdicom.WriteDICOM(f, levels, h); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d B-scans of %d × %d, %s, seed %d, %s%s\n", *out, *frames, p.Volume.Rows, *cols, *eye, *seed, export,
		map[bool]string{true: ", look " + look.Name}[look.Name != ""])
	if *truthPath != "" {
		truth, err := p.Truth(ctx, *seed)
		if err != nil {
			return err
		}
		if err := writeJSON(*truthPath, truth); err != nil {
			return err
		}
		fmt.Printf("wrote %s: CST %.1f µm, %d lesions\n", *truthPath, truth.Measurements.CentralSubfieldThicknessUm, len(truth.Lesions))
	}
	return nil
}
