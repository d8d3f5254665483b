package imaging

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
)

// Boundary names, inner retina to choroid, after Chiu et al. 2010.
const (
	ILM     = "ILM"
	RNFLGCL = "RNFL/GCL"
	IPLINL  = "IPL/INL"
	INLOPL  = "INL/OPL"
	OPLONL  = "OPL/ONL"
	EZ      = "EZ"
	RPE     = "RPE"
	BM      = "BM"
)

// BoundaryNames lists the boundaries top to bottom.
var BoundaryNames = []string{ILM, RNFLGCL, IPLINL, INLOPL, OPLONL, EZ, RPE, BM}

// PhantomOptions shape a synthetic macular cube. Zero values take the
// defaults of a clinical 6 × 6 mm macular cube: 49 B-scans of 496 × 512
// over 1.92 mm of depth (128 × 1024 × 512 is the other common protocol).
type PhantomOptions struct {
	Seed               uint64
	Frames, Rows, Cols int
	Laterality         string // "OD" (default) or "OS"
	// Fluid adds an intraretinal fluid pocket near the fovea and a
	// subretinal one (a serous detachment between the outer segments and
	// the RPE) on the other side.
	Fluid bool
	// Drusen raises the RPE over a few dome-shaped deposits on Bruch's
	// membrane.
	Drusen bool
	// Look draws the phantom as another device's images look (the zero
	// Look: as it always was); its Rows, where set, are the phantom's.
	Look Look
}

func (o PhantomOptions) withDefaults() PhantomOptions {
	o.Frames = cmp.Or(o.Frames, 49)
	o.Rows = cmp.Or(o.Rows, 496)
	o.Cols = cmp.Or(o.Cols, 512)
	if o.Laterality == "" {
		o.Laterality = "OD"
	}
	return o
}

// Phantom is a synthetic exam with its ground truth.
type Phantom struct {
	Volume *Volume
	// Clean is the noise-free volume, for judging the denoiser.
	Clean *Volume
	// Boundaries holds, per boundary name, the exact row (fractional) of
	// each A-scan, indexed [frame*Cols+col].
	Boundaries map[string][]float64
	// FluidMask marks the voxels of intraretinal and subretinal fluid;
	// DrusenMask the deposits under the raised RPE. Nil when absent.
	FluidMask, DrusenMask []bool
	// SubretinalMask marks which fluid voxels are subretinal.
	SubretinalMask []bool
	// Geometry is where the phantom put the fovea and how deep the pit is.
	Geometry PhantomGeometry
}

// PhantomGeometry is the drawn anatomy a test can check measurements
// against without trusting the measuring code.
type PhantomGeometry struct {
	// FoveaXMm, FoveaYMm locate the centre of the foveal pit in scan
	// coordinates (Volume.PositionMm): mm from the scan centre, +x toward
	// higher columns, +y toward later B-scans (inferior).
	FoveaXMm, FoveaYMm float64
	// PitDepthUm is how much thinner the retina is at the centre of the
	// pit than around it.
	PitDepthUm float64
}

// Export is how a device stores levels, for phantoms written as a device
// would write them (octflow phantom --export).
type Export string

// Exports a phantom can be written in.
const (
	// ExportLinear16 is 16-bit and linear in reflectivity, as raw data.
	ExportLinear16 Export = "linear16"
	// ExportLog8 is 8-bit over the 40 dB of log reflectivity below the
	// brightest sample, as dB-scaled displays store it.
	ExportLog8 Export = "log8"
	// ExportPow8 is 8-bit 255·(v/max)^0.25, the display transform of
	// Heidelberg's viewer (and of the real scans in testdata/realdata).
	ExportPow8 Export = "pow8"
)

// Exports lists every export, for tests and flags.
var Exports = []Export{ExportLinear16, ExportLog8, ExportPow8}

// ParseExport reads an export's name.
func ParseExport(s string) (Export, error) {
	for _, e := range Exports {
		if string(e) == s {
			return e, nil
		}
	}
	return "", fmt.Errorf("export %q: want linear16, log8 or pow8", s)
}

// Levels returns v's samples as a device exporting e stores them, and
// the sample size in bits.
func (e Export) Levels(v *Volume) (*Volume, int) {
	out := NewVolumeLike(v)
	var peak float64
	for _, x := range v.Data {
		peak = max(peak, float64(x))
	}
	if peak <= 0 {
		e = ExportLinear16
	}
	switch e {
	case ExportLog8:
		for i, x := range v.Data {
			db := 10 * math.Log10(max(float64(x), 1e-12)/peak)
			out.Data[i] = float32(math.Round(255 * min(max((db+40)/40, 0), 1)))
		}
		return out, 8
	case ExportPow8:
		for i, x := range v.Data {
			out.Data[i] = float32(math.Round(255 * math.Pow(max(float64(x), 0)/peak, 0.25)))
		}
		return out, 8
	}
	copy(out.Data, v.Data)
	return out, 16
}

// Field of view of the macular cube.
const (
	fieldMm   = 6.0
	depthUm   = 1920.0
	signalMax = 80.0 // scale of the layer reflectivities below
)

// Reflectivities of the noise-free phantom (× signalMax).
const (
	reflVitreous = 6.0
	reflFluid    = 6.0
	reflDrusen   = 100.0
	shadowGain   = 0.35 // what a vessel lets through to the layers below it
)

// dome is an elliptical bump: height at (x, y) mm.
type dome struct{ x, y, rx, ry, height float64 }

func (d dome) at(x, y float64) float64 {
	dx, dy := (x-d.x)/d.rx, (y-d.y)/d.ry
	e := dx*dx + dy*dy
	if e >= 1 {
		return 0
	}
	return d.height * math.Sqrt(1-e)
}

// vessel is a retinal vessel seen en face: y = y0 + slope·x + curve·x².
type vessel struct{ y0, slope, curve, width float64 }

func (v vessel) covers(x, y float64) bool {
	return math.Abs(y-(v.y0+v.slope*x+v.curve*x*x)) < v.width/2
}

// aScan is the geometry of one A-scan in µm from the top of the frame.
type aScan struct {
	b          [8]float64 // boundaries, ILM..BM
	elm        float64    // external limiting membrane
	osBottom   float64    // bottom of the outer segments (top of subretinal fluid)
	rpeBottom  float64    // bottom of the RPE band (top of drusen)
	irfTop     float64    // intraretinal fluid [irfTop, irfBottom)
	irfBottom  float64
	shadow     bool    // under a vessel
	shadowGain float64 // what the vessel lets through
}

// NewPhantom draws a macular cube: eight boundaries over a foveal pit, a
// curved and tilted Bruch's membrane, smooth seeded undulations across
// B-scans, vessel shadows, layer reflectivities typical of SD-OCT,
// optional fluid and drusen, and Generalized Gamma speckle over a noise
// floor. The same options always give the same volume.
func NewPhantom(o PhantomOptions) *Phantom {
	o = o.withDefaults()
	o.Rows = cmp.Or(o.Look.Rows, o.Rows)
	sp := Spacing{AxialUm: depthUm / float64(o.Rows), LateralUm: fieldMm * 1000 / float64(o.Cols),
		FrameUm: fieldMm * 1000 / float64(o.Frames)}
	clean := NewVolume(o.Frames, o.Rows, o.Cols, sp)
	clean.Laterality = o.Laterality
	p := &Phantom{Clean: clean, Boundaries: map[string][]float64{}}
	for _, n := range BoundaryNames {
		p.Boundaries[n] = make([]float64, o.Frames*o.Cols)
	}

	geo := rand.New(rand.NewPCG(o.Seed, 1))
	fovX, fovY := (geo.Float64()-0.5)*0.4, (geo.Float64()-0.5)*0.4 // mm off centre
	pitDepth := 110 + 30*geo.Float64()                             // µm
	p.Geometry = PhantomGeometry{FoveaXMm: fovX, FoveaYMm: fovY, PitDepthUm: pitDepth}
	tilt := (geo.Float64() - 0.5) * 40 // µm across the field
	waveA, waveF, waveP := 6+6*geo.Float64(), 0.8+0.8*geo.Float64(), geo.Float64()*math.Pi
	nasal := 1.0 // the optic disc, where vessels come from, is nasal
	if o.Laterality == "OS" {
		nasal = -1
	}
	var vessels []vessel
	for i := range 4 {
		side := float64(i%2*2 - 1) // arcades above and below the fovea
		vessels = append(vessels, vessel{
			y0: fovY + side*(0.9+0.9*geo.Float64()), slope: -side * nasal * (0.1 + 0.15*geo.Float64()),
			curve: side * (0.03 + 0.05*geo.Float64()), width: 0.06 + 0.06*geo.Float64()})
	}
	var irf, srf []dome
	var drusen []dome
	if o.Fluid {
		irf = append(irf, dome{x: fovX + nasal*(0.45+0.3*geo.Float64()), y: fovY + (geo.Float64()-0.5)*0.4,
			rx: 0.35, ry: 0.5, height: 0.45})
		srf = append(srf, dome{x: fovX - nasal*(0.9+0.4*geo.Float64()), y: fovY + (geo.Float64()-0.5)*0.6,
			rx: 0.5 + 0.2*geo.Float64(), ry: 0.4 + 0.2*geo.Float64(), height: 50 + 40*geo.Float64()})
	}
	if o.Drusen {
		for range 3 + geo.IntN(3) {
			r := 0.12 + 0.15*geo.Float64()
			drusen = append(drusen, dome{x: fovX + (geo.Float64()-0.5)*2.4, y: fovY + (geo.Float64()-0.5)*2.4,
				rx: r, ry: r * (0.8 + 0.4*geo.Float64()), height: 30 + 50*geo.Float64()})
		}
	}

	geometry := func(f, c int) aScan {
		x := (float64(c)-float64(o.Cols-1)/2)*sp.LateralUm/1000 - fovX
		y := (float64(f)-float64(o.Frames-1)/2)*sp.FrameUm/1000 - fovY
		r2 := x*x + y*y
		pit := math.Exp(-r2 / (2 * 0.55 * 0.55))
		sx, sy := (x+fovX)/(fieldMm/2), (y+fovY)/(fieldMm/2) // scan coordinates, 1 at the field's edge
		bm := 1250 + 12*r2 + tilt*x/fieldMm + o.Look.CurvatureUm*(sx*sx+sy*sy)
		wave := waveA * math.Sin(waveF*x+waveP) * math.Cos(0.7*waveF*y)
		thickness := 320 - pitDepth*pit + wave // ILM→BM without lesions, µm
		onl := 75 + 35*pit                     // ONL thickens under the pit
		outer := 20 + 25 + 20 + onl            // RPE + OS + IS/ELM + ONL
		inner := math.Max(thickness-outer, 4)

		var a aScan
		ax, ay := x+fovX, y+fovY // scan coordinates
		var lift float64
		for _, d := range drusen {
			lift = math.Max(lift, d.at(ax, ay))
		}
		var detach float64
		for _, d := range srf {
			detach = math.Max(detach, d.at(ax, ay))
		}
		a.b[7] = bm
		a.rpeBottom = bm - lift
		a.b[6] = a.rpeBottom - 20
		a.osBottom = a.b[6] - detach
		a.b[5] = a.osBottom - 25
		a.elm = a.b[5] - 20
		a.b[4] = a.elm - onl
		a.b[0] = a.b[4] - inner
		a.b[1] = a.b[0] + 0.18*inner
		a.b[2] = a.b[0] + 0.60*inner
		a.b[3] = a.b[0] + 0.80*inner
		for _, d := range irf {
			if h := d.at(ax, ay); h > 0 {
				half := h * (a.b[5] - a.b[3]) / 2
				mid := (a.b[3] + a.b[4]) / 2
				a.irfTop, a.irfBottom = mid-half, mid+half
			}
		}
		for _, v := range vessels {
			a.shadow = a.shadow || v.covers(ax, ay)
		}
		a.shadowGain = cmp.Or(o.Look.ShadowGain, shadowGain)
		return a
	}

	if o.Fluid {
		p.FluidMask = make([]bool, len(clean.Data))
		p.SubretinalMask = make([]bool, len(clean.Data))
	}
	if o.Drusen {
		p.DrusenMask = make([]bool, len(clean.Data))
	}
	forEachFrame(o.Frames, func(f int) {
		for c := 0; c < o.Cols; c++ {
			a := geometry(f, c)
			for i, n := range BoundaryNames {
				p.Boundaries[n][f*o.Cols+c] = a.b[i] / sp.AxialUm
			}
			for r := 0; r < o.Rows; r++ {
				z := (float64(r) + 0.5) * sp.AxialUm
				val, kind := a.reflectivity(z)
				i := (f*o.Rows+r)*o.Cols + c
				switch kind {
				case inIRF:
					p.FluidMask[i] = true
				case inSRF:
					p.FluidMask[i], p.SubretinalMask[i] = true, true
				case inDrusen:
					p.DrusenMask[i] = true
				}
				clean.Data[i] = float32(val * signalMax)
			}
		}
	})

	p.Volume = addSpeckle(clean, o.Seed, o.Look)
	return p
}

// Voxel kinds the masks record.
const (
	inTissue = iota
	inIRF
	inSRF
	inDrusen
)

// reflectivity is the noise-free signal at depth z (µm) and what lies there.
func (a *aScan) reflectivity(z float64) (float64, int) {
	b := a.b
	var val float64
	kind := inTissue
	switch {
	case z < b[0]:
		return reflVitreous, inTissue
	case z < b[1]:
		val = 170 // RNFL
	case z < b[2]:
		val = 105 // GCL + IPL
	case z < b[3]:
		val = 50 // INL
	case z < b[4]:
		val = 100 // OPL
	case z < a.elm:
		val = 40 // ONL
	case z < b[5]:
		val = 55 // ELM and inner segments, a faint step below the EZ's
	case z < a.osBottom:
		val = 150 // outer segments, bright at the EZ line
	case z < b[6]:
		val, kind = reflFluid, inSRF
	case z < a.rpeBottom:
		val = 220 // RPE
	case z < b[7]:
		val, kind = reflDrusen, inDrusen
	default:
		val = 20 + 100*math.Exp(-(z-b[7])/250) // choroid, fading with depth
	}
	if z >= a.irfTop && z < a.irfBottom {
		val, kind = reflFluid, inIRF
	}
	if a.shadow && z >= b[1] {
		val *= a.shadowGain
	}
	return val, kind
}

// Speckle follows a Generalized Gamma distribution, which fits SD-OCT
// intensity better than Rayleigh or Gamma (Biomed. Opt. Express 8(9):3903):
// X = scale · G^(1/p) with G ~ Gamma(k, 1), scaled to mean 1.
const (
	speckleK = 1.8
	speckleP = 1.3
)

// addSpeckle multiplies each sample by speckle of mean 1 and adds a
// noise floor to each sample. The speckle is Generalized Gamma, drawn per
// sample, the draws the phantoms always had; in an unaveraged look it is
// fully developed speckle seen through the device's optics: a complex
// Gaussian field blurred by a Gaussian of the look's grain at half its
// height, whose intensity is exponential and correlated over the grain.
// Each frame has its own seeded stream, so the result does not depend on
// scheduling.
func addSpeckle(clean *Volume, seed uint64, look Look) *Volume {
	noisy := NewVolumeLike(clean)
	lgK, _ := math.Lgamma(speckleK)
	lgK1, _ := math.Lgamma(speckleK + 1/speckleP)
	scale := math.Exp(lgK - lgK1)
	forEachFrame(clean.Frames, func(f int) {
		rng := rand.New(rand.NewPCG(seed, uint64(f)+1000))
		src, dst := clean.Frame(f), noisy.Frame(f)
		if !look.Unaveraged {
			for i, x := range src {
				s := scale * math.Pow(gamma(rng, speckleK), 1/speckleP)
				dst[i] = float32(float64(x)*s + signalMax*math.Abs(rng.NormFloat64()))
			}
			return
		}
		speckle := grainedSpeckle(rng, clean.Rows, clean.Cols, max(look.GrainRows, 1), max(look.GrainCols, 1))
		for i, x := range src {
			dst[i] = float32(float64(x)*speckle[i] + signalMax*math.Abs(rng.NormFloat64()))
		}
	})
	return noisy
}

// grainedSpeckle is a B-scan (rows × cols) of fully developed speckle of
// mean 1 whose grain is grainRows × grainCols samples wide at half height:
// the intensity of a complex Gaussian field blurred so.
func grainedSpeckle(rng *rand.Rand, rows, cols, grainRows, grainCols int) []float64 {
	re, im := make([]float64, rows*cols), make([]float64, rows*cols)
	for i := range re {
		re[i], im[i] = rng.NormFloat64(), rng.NormFloat64()
	}
	for _, field := range [][]float64{re, im} {
		blurAlong(field, rows, cols, float64(grainRows)/2.355, cols, 1) // down each A-scan
		blurAlong(field, cols, rows, float64(grainCols)/2.355, 1, cols) // across each row
	}
	out := make([]float64, rows*cols)
	var sum float64
	for i := range out {
		out[i] = re[i]*re[i] + im[i]*im[i]
		sum += out[i]
	}
	mean := sum / float64(len(out))
	for i := range out {
		out[i] /= mean
	}
	return out
}

// blurAlong blurs field with a Gaussian of sigma samples along lines of
// n samples (stride apart), lines of them starting every step (count
// lines); a sigma under half a sample leaves it as it is.
func blurAlong(field []float64, n, count int, sigma float64, stride, step int) {
	if sigma < 0.5 {
		return
	}
	half := int(math.Ceil(3 * sigma))
	kernel := make([]float64, 2*half+1)
	for k := range kernel {
		d := float64(k - half)
		kernel[k] = math.Exp(-d * d / (2 * sigma * sigma))
	}
	line := make([]float64, n)
	for l := range count {
		base := l * step
		for j := range n {
			line[j] = field[base+j*stride]
		}
		for j := range n {
			var v float64
			for k, w := range kernel {
				if jj := j + k - half; jj >= 0 && jj < n {
					v += w * line[jj]
				}
			}
			field[base+j*stride] = v
		}
	}
}

// gamma draws from Gamma(k, 1) by Marsaglia and Tsang's method (k ≥ 1).
func gamma(rng *rand.Rand, k float64) float64 {
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}
