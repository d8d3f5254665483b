package imaging

import (
	"math"
	"testing"
)

func TestPSNRAndSSIMRankDistortions(t *testing.T) {
	ref := NewPhantom(PhantomOptions{Seed: 1, Frames: 2, Rows: 64, Cols: 64}).Clean
	scaled := func(k float32) *Volume {
		v := NewVolume(ref.Frames, ref.Rows, ref.Cols, ref.Spacing)
		for i, x := range ref.Data {
			v.Data[i] = x * k
		}
		return v
	}
	if p, s := PSNR(ref, ref), SSIM(ref, ref); !math.IsInf(p, 1) || math.Abs(s-1) > 1e-9 {
		t.Fatalf("identical volumes: PSNR %v, SSIM %v; want +Inf and 1", p, s)
	}
	cases := []struct {
		name          string
		better, worse *Volume
	}{
		{"5% vs 20% gain error", scaled(1.05), scaled(1.2)},
		{"speckled vs its own clean copy scaled 5%", scaled(1.05), NewPhantom(PhantomOptions{Seed: 1, Frames: 2, Rows: 64, Cols: 64}).Volume},
	}
	for _, c := range cases {
		if PSNR(ref, c.better) <= PSNR(ref, c.worse) || SSIM(ref, c.better) <= SSIM(ref, c.worse) {
			t.Errorf("%s: PSNR %.1f vs %.1f, SSIM %.3f vs %.3f; the first should score higher", c.name,
				PSNR(ref, c.better), PSNR(ref, c.worse), SSIM(ref, c.better), SSIM(ref, c.worse))
		}
	}
}
