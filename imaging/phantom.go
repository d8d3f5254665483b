package imaging

import (
	"math"
	"math/rand/v2"
	"sync"
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
// over 1.92 mm of depth.
type PhantomOptions struct {
	Seed               uint64
	Frames, Rows, Cols int
	Laterality         string // "OD" (default) or "OS"
	// Fluid adds an intraretinal fluid pocket near the fovea.
	Fluid bool
}

func (o PhantomOptions) withDefaults() PhantomOptions {
	if o.Frames == 0 {
		o.Frames = 49
	}
	if o.Rows == 0 {
		o.Rows = 496
	}
	if o.Cols == 0 {
		o.Cols = 512
	}
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
	// FluidMask marks the voxels of the fluid pocket (nil without fluid).
	FluidMask []bool
}

// Field of view of the macular cube.
const (
	fieldMm   = 6.0
	depthUm   = 1920.0
	signalMax = 80.0 // scale of the layer reflectivities below
)

// NewPhantom draws a macular cube: eight boundaries over a foveal pit, a
// slightly curved Bruch's membrane, layer reflectivities typical of
// SD-OCT, optional fluid, and multiplicative speckle. The same options
// always give the same volume.
func NewPhantom(o PhantomOptions) *Phantom {
	o = o.withDefaults()
	sp := Spacing{AxialUm: depthUm / float64(o.Rows), LateralUm: fieldMm * 1000 / float64(o.Cols),
		FrameUm: fieldMm * 1000 / float64(o.Frames)}
	clean := NewVolume(o.Frames, o.Rows, o.Cols, sp)
	clean.Laterality = o.Laterality
	p := &Phantom{Clean: clean, Boundaries: map[string][]float64{}}
	for _, n := range BoundaryNames {
		p.Boundaries[n] = make([]float64, o.Frames*o.Cols)
	}
	if o.Fluid {
		p.FluidMask = make([]bool, len(clean.Data))
	}

	geo := rand.New(rand.NewPCG(o.Seed, 1))
	fovX, fovY := (geo.Float64()-0.5)*0.4, (geo.Float64()-0.5)*0.4 // mm off centre
	pitDepth := 110 + 30*geo.Float64()                             // µm
	tilt := (geo.Float64() - 0.5) * 40                             // µm across the field

	for f := 0; f < o.Frames; f++ {
		y := (float64(f)-float64(o.Frames-1)/2)*sp.FrameUm/1000 - fovY
		for c := 0; c < o.Cols; c++ {
			x := (float64(c)-float64(o.Cols-1)/2)*sp.LateralUm/1000 - fovX
			r2 := x*x + y*y
			pit := math.Exp(-r2 / (2 * 0.55 * 0.55))
			bm := 1250 + 12*r2 + tilt*x/fieldMm                 // µm from the top
			thickness := 320 - pitDepth*pit + 8*math.Sin(1.3*x) // ILM→BM, µm
			onl := 75 + 35*pit                                  // ONL thickens under the pit
			outer := 20 + 25 + 20 + onl                         // RPE + OS + IS/ELM + ONL
			inner := math.Max(thickness-outer, 4)
			ilm := bm - outer - inner
			depths := []float64{
				ilm,
				ilm + 0.18*inner,
				ilm + 0.60*inner,
				ilm + 0.80*inner,
				ilm + inner,
				bm - 45,
				bm - 20,
				bm,
			}
			for i, n := range BoundaryNames {
				p.Boundaries[n][f*o.Cols+c] = depths[i] / sp.AxialUm
			}
		}
	}

	// Fluid: an ellipsoid in the outer nuclear layer beside the pit.
	var fx, fy, frx, fry float64
	if o.Fluid {
		fx, fy = fovX+0.4+geo.Float64()*0.3, fovY+(geo.Float64()-0.5)*0.4
		frx, fry = 0.35, 0.5
	}

	var wg sync.WaitGroup
	for f := 0; f < o.Frames; f++ {
		wg.Go(func() {
			for c := 0; c < o.Cols; c++ {
				var b [8]float64
				for i, n := range BoundaryNames {
					b[i] = p.Boundaries[n][f*o.Cols+c] * sp.AxialUm
				}
				x := (float64(c) - float64(o.Cols-1)/2) * sp.LateralUm / 1000
				y := (float64(f) - float64(o.Frames-1)/2) * sp.FrameUm / 1000
				var fluidTop, fluidBottom float64
				if o.Fluid {
					dx, dy := (x-fx)/frx, (y-fy)/fry
					if e := dx*dx + dy*dy; e < 1 {
						half := math.Sqrt(1-e) * 0.45 * (b[5] - b[3]) / 2
						mid := (b[3] + b[4]) / 2
						fluidTop, fluidBottom = mid-half, mid+half
					}
				}
				for r := 0; r < o.Rows; r++ {
					z := (float64(r) + 0.5) * sp.AxialUm
					val := reflectivity(z, b)
					if fluidBottom > fluidTop && z >= fluidTop && z < fluidBottom {
						val = 6
						p.FluidMask[(f*o.Rows+r)*o.Cols+c] = true
					}
					clean.Set(f, r, c, float32(val*signalMax))
				}
			}
		})
	}
	wg.Wait()

	p.Volume = addSpeckle(clean, o.Seed)
	return p
}

// reflectivity is the noise-free signal at depth z (µm) of an A-scan
// whose boundaries are b (µm, ILM..BM).
func reflectivity(z float64, b [8]float64) float64 {
	switch {
	case z < b[0]:
		return 6 // vitreous
	case z < b[1]:
		return 170 // RNFL
	case z < b[2]:
		return 105 // GCL + IPL
	case z < b[3]:
		return 50 // INL
	case z < b[4]:
		return 100 // OPL
	case z < b[5]-20:
		return 40 // ONL
	case z < b[5]:
		return 75 // ELM and inner segments
	case z < b[6]:
		return 140 // outer segments, bright at the EZ line
	case z < b[7]:
		return 220 // RPE
	}
	return 20 + 100*math.Exp(-(z-b[7])/250) // choroid, fading with depth
}

// addSpeckle multiplies each sample by Gamma(k, 1/k) speckle (mean 1) and
// adds a small noise floor. Each frame has its own seeded stream, so the
// result does not depend on scheduling.
func addSpeckle(clean *Volume, seed uint64) *Volume {
	noisy := NewVolume(clean.Frames, clean.Rows, clean.Cols, clean.Spacing)
	noisy.Laterality = clean.Laterality
	const shape = 4.0
	var wg sync.WaitGroup
	for f := 0; f < clean.Frames; f++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(f)+1000))
			src, dst := clean.Frame(f), noisy.Frame(f)
			for i, x := range src {
				v := float64(x)*gamma(rng, shape)/shape + 2*signalMax*math.Abs(rng.NormFloat64())
				dst[i] = float32(v)
			}
		})
	}
	wg.Wait()
	return noisy
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
