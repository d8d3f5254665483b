package octdicom

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"testing"

	"octflow/imaging"
	"octflow/octdicom/hostile"
)

// exactProduct is the product of factors, with no bound on its size.
func exactProduct(factors ...uint64) *big.Int {
	p := big.NewInt(1)
	for _, f := range factors {
		p.Mul(p, new(big.Int).SetUint64(f))
	}
	return p
}

// TestTheVolumeSizeArithmeticCannotOverflow walks product, the
// pre-scan's rows × columns × frames × samples, with factors whose
// product overflows 64 bits (and would wrap to a small number, or to 0),
// and products just under, at and just over the limit: it says a product
// is within the limit exactly when it is, and then gives it exactly.
func TestTheVolumeSizeArithmeticCannotOverflow(t *testing.T) {
	const all = math.MaxUint64
	const limit = uint64(maxSamples) // 2^28
	for _, c := range []struct {
		limit   uint64
		factors []uint64
	}{
		// Products over 64 bits.
		{all, []uint64{1 << 32, 1 << 32}},                     // 2^64: wraps to 0
		{all, []uint64{1 << 15, 1 << 15, 1 << 19, 1 << 15}},   // 2^64 samples of the hostile file
		{all, []uint64{1 << 63, 2}},                           // wraps to 0
		{all, []uint64{4, 1<<62 + 16}},                        // 2^64 + 64: wraps to 64
		{all, []uint64{65535, 65535, 65535, 1 << 40}},         // 2^88
		{all, []uint64{1 << 32, 1 << 32, 1}},                  // the overflow before the last factor
		{all, []uint64{1, 1 << 40, 1 << 40, 1}},               // and in the middle
		{all, []uint64{all, 2}},                               // 2^65 - 2
		{limit, []uint64{1 << 32, 1 << 32}},                   // over 64 bits and the limit
		{limit, []uint64{1 << 15, 1 << 15, 1 << 19, 1 << 15}}, // likewise
		{limit, []uint64{4, 1<<62 + 16}},                      // wraps to 64, under the limit
		{limit, []uint64{8, 1<<61 + 4}},                       // wraps to 32
		// Products that fit in 64 bits, at the edge of it.
		{all, []uint64{1<<32 + 1, 1<<32 - 1}}, // 2^64 - 1
		{all, []uint64{1 << 32, 1<<32 - 1}},   // 2^64 - 2^32
		{all, []uint64{1 << 63, 1}},
		// Products at the limit, just under and just over it.
		{limit, []uint64{16384, 16384}},         // 2^28
		{limit, []uint64{16384, 16384, 1, 1}},   // 2^28
		{limit, []uint64{16383, 16384, 1, 1}},   // 2^28 - 2^14
		{limit, []uint64{16385, 16384, 1, 1}},   // 2^28 + 2^14
		{limit, []uint64{512, 512, 1024, 1}},    // 2^28 over frames
		{limit, []uint64{512, 512, 1025, 1}},    // one frame more
		{limit, []uint64{4096, 4096, 5, 3}},     // 3 samples a pixel
		{limit, []uint64{4096, 4096, 6, 3}},     // one frame more
		{limit, []uint64{limit}},                // the limit itself
		{limit, []uint64{limit + 1}},            // one over
		{limit, []uint64{2, limit / 2}},         // the limit in two factors
		{limit, []uint64{2, limit/2 + 1}},       // two over
		{limit, []uint64{limit, 1, 1, 1, 1, 1}}, // many ones
	} {
		name := fmt.Sprintf("%v within %d", c.factors, c.limit)
		t.Run(name, func(t *testing.T) {
			exact := exactProduct(c.factors...)
			within := exact.Cmp(new(big.Int).SetUint64(c.limit)) <= 0
			got, ok := product(c.limit, c.factors...)
			switch {
			case ok && !within:
				t.Errorf("product(%v) says %d samples, within %d; the exact product is %s: an overflowing or over-limit size passes, and the parser would allocate it",
					c.factors, got, c.limit, exact)
			case !ok && within:
				t.Errorf("product(%v) refuses %s samples, within the limit of %d", c.factors, exact, c.limit)
			case ok && exact.Cmp(new(big.Int).SetUint64(got)) != 0:
				t.Errorf("product(%v) = %d, want the exact %s", c.factors, got, exact)
			}
		})
	}
}

// TestThePreScanRefusesADeclaredSizeThatOverflows checks the size the
// pre-scan compares with the pixel data's length
// (pixelGeometry.check): a declared volume whose rows × columns ×
// frames × samples overflow 64 bits is refused, above all one that
// wraps to exactly the bytes the file holds (the parser would allocate
// the frames it declares); one within the limit is accepted with its
// exact size, and one just over it refused.
func TestThePreScanRefusesADeclaredSizeThatOverflows(t *testing.T) {
	all := [5]bool{true, true, true, true, true}
	for _, c := range []struct {
		name                              string
		rows, cols, samples, frames, bits uint64
		length                            uint32
		ok                                bool
	}{
		{"2^64 + 64 8-bit samples, wrapping to the 64 bytes held", 4, 1, 1, 1<<62 + 16, 8, 64, false},
		{"2^64 + 32 16-bit samples, wrapping to the 64 bytes held", 8, 1, 1, 1<<61 + 4, 16, 64, false},
		{"2^64 samples, wrapping to 0, over no pixel data", 32768, 32768, 32768, 524288, 8, 0, false},
		{"2^64 + 2^28 samples, wrapping to the limit", 1 << 14, 1 << 14, 1, 1<<36 + 1, 8, 1 << 28, false},
		{"at the limit, 2^28 samples", 16384, 16384, 1, 1, 8, 1 << 28, true},
		{"at the limit over frames", 512, 512, 1, 1024, 8, 1 << 28, true},
		{"just under the limit", 16383, 16384, 1, 1, 8, 16383 * 16384, true},
		{"just over the limit", 16385, 16384, 1, 1, 8, 16385 * 16384, false},
		{"one frame over the limit", 512, 512, 1, 1025, 8, 0, false},
		{"3 samples a pixel, under the limit", 4096, 4096, 3, 5, 8, 4096 * 4096 * 15, true},
		{"3 samples a pixel, one frame over", 4096, 4096, 3, 6, 8, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := pixelGeometry{rows: c.rows, cols: c.cols, samples: c.samples, frames: c.frames, bits: c.bits, seen: all}
			exact := exactProduct(c.rows, c.cols, c.frames, c.samples)
			samples, _, frames, err := g.check(c.length)
			if c.ok {
				if err != nil || exact.Cmp(new(big.Int).SetUint64(samples)) != 0 || frames != c.frames {
					t.Errorf("%d×%d×%d×%d within the limit: %d samples, %d frames, %v; want %s samples", c.frames, c.rows, c.cols, c.samples, samples, frames, err, exact)
				}
				return
			}
			if !errors.Is(err, imaging.ErrInvalidVolume) {
				t.Errorf("the pre-scan accepted a declared volume of %d×%d×%d samples (%d per pixel): %s samples in all, over the limit of %d (64 bits wrap it to %d): the parser would allocate what the header declares (err %v)",
					c.frames, c.rows, c.cols, c.samples, exact, uint64(maxSamples), c.rows*c.cols*c.frames*c.samples, err)
			}
		})
	}
	// The same through PreScan, as a file: a header whose size wraps to
	// the 64 bytes of pixel data it holds, and the 2^64-sample one.
	for name, data := range map[string][]byte{
		"2^62 + 16 frames of 4 × 1 over 64 bytes": hostile.Frames("4611686018427387920", 4, 1, 8, 64),
		"samples-overflow":                        hostile.SamplesOverflow(),
	} {
		if d, err := PreScan(bytes.NewReader(data), int64(len(data))); !errors.Is(err, imaging.ErrInvalidVolume) {
			t.Errorf("%s: the pre-scan accepted a declared size that overflows 64 bits (%d frames of %d×%d): %v", name, d.Frames, d.Rows, d.Cols, err)
		}
	}
}
