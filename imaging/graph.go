package imaging

import (
	"math"
	"slices"
)

// pathFinder finds boundaries in one B-scan as shortest paths across a
// gradient-weighted graph, after Chiu et al. 2010: every pixel is a node,
// an edge joins a pixel to its right-hand and vertical neighbours, and the
// edge from a to b weighs 2 − (g_a + g_b) + wMin, where g is the gradient
// of the wanted polarity in [0, 1]: normalised by its typical strength in
// the search region and capped at 1 (see search). A
// boundary is then the cheapest path from the first column to the last,
// found by Dijkstra's algorithm from every node of the first column at
// once (Chiu's added end columns of minimal weight do the same).
//
// Leftward edges of the original 8-neighbour graph are left out: a
// boundary crosses the B-scan left to right, so they never shorten it.
//
// A pathFinder keeps its buffers between searches and B-scans; it is not
// safe for concurrent use.
type pathFinder struct {
	rows, cols int
	k          int       // half-height of the gradient window
	grad       []float32 // signed vertical gradient, + where it gets brighter downwards
	weight     []float32 // normalised gradient of the polarity being searched
	dist       []float32
	prev       []int32
	done       []bool
	peaks      []float32
	heap       nodeHeap
}

// wMin keeps every edge weight positive.
const wMin = 1e-5

func newPathFinder(rows, cols int) *pathFinder {
	n := rows * cols
	return &pathFinder{rows: rows, cols: cols, grad: make([]float32, n), weight: make([]float32, n),
		dist: make([]float32, n), prev: make([]int32, n), done: make([]bool, n)}
}

// setImage computes the vertical gradient of a log-intensity B-scan: the
// value at row r is the sum of rows r … r+k−1 minus the sum of rows
// r−k … r−1, so it peaks at a boundary whose first row is r.
func (p *pathFinder) setImage(logs []float32, k int) {
	rows, cols := p.rows, p.cols
	p.k = k
	clear(p.grad)
	for r := k; r+k <= rows; r++ {
		g := p.grad[r*cols : (r+1)*cols]
		for d := range k {
			below, above := logs[(r+d)*cols:(r+d+1)*cols], logs[(r-1-d)*cols:(r-d)*cols]
			for i := range g {
				g[i] += below[i] - above[i]
			}
		}
	}
}

// Polarities of a boundary, going down an A-scan.
const (
	darkToLight = +1
	lightToDark = -1
)

// find returns the cheapest boundary of the given polarity inside the
// region lo[c] ≤ row ≤ hi[c] (inclusive), as one row per column.
func (p *pathFinder) find(polarity int, lo, hi []int, out []int) {
	p.search(p.grad, float32(polarity), 0, lo, hi, out)
}

// findRidge returns the brightest band inside the region: the same search
// over log intensity, normalised from the region's darkest to its
// brightest pixel.
func (p *pathFinder) findRidge(logs []float32, lo, hi []int, out []int) {
	floor := float32(math.Inf(1))
	for c := range p.cols {
		for r := min(max(lo[c], 0), p.rows-1); r <= min(hi[c], p.rows-1); r++ {
			floor = min(floor, logs[r*p.cols+c])
		}
	}
	p.search(logs, 1, floor, lo, hi, out)
}

// search is the Dijkstra search over field, weighted by
// max(sign·field − floor, 0), normalised over the region and capped at 1.
func (p *pathFinder) search(field []float32, sign, floor float32, lo, hi []int, out []int) {
	rows, cols := p.rows, p.cols
	for c := range cols {
		lo[c] = min(max(lo[c], 0), rows-1)
		hi[c] = min(max(hi[c], lo[c]), rows-1)
		// Keep the region connected: a path moves at most one row per
		// column, so where the region jumps (the bound above it dives into
		// the foveal pit) it is widened towards the previous column.
		if c > 0 {
			lo[c] = min(lo[c], hi[c-1]+1)
			hi[c] = max(hi[c], lo[c-1]-1)
		}
	}
	// Normalise by the median over columns of each column's strongest
	// response, and cap at 1: an edge that is much stronger in a few
	// columns (the top of a vessel's shadow) then cannot pull the path
	// away from one that is merely typical everywhere.
	peaks := p.peaks[:0]
	for c := range cols {
		var top float32
		for r := lo[c]; r <= hi[c]; r++ {
			top = max(top, sign*field[r*cols+c]-floor)
		}
		peaks = append(peaks, top)
	}
	p.peaks = peaks
	slices.Sort(peaks)
	top := peaks[len(peaks)/2]
	scale := float32(0)
	if top > 0 {
		scale = 1 / top
	}
	for c := range cols {
		for r := lo[c]; r <= hi[c]; r++ {
			i := r*cols + c
			p.weight[i] = min(max(sign*field[i]-floor, 0)*scale, 1)
			p.dist[i] = float32(math.Inf(1))
			p.done[i] = false
			p.prev[i] = -1
		}
	}

	p.heap = p.heap[:0]
	for r := lo[0]; r <= hi[0]; r++ {
		p.dist[r*cols] = 0
		p.heap.push(heapNode{0, int32(r * cols)})
	}
	end := -1
	for len(p.heap) > 0 {
		n := p.heap.pop()
		i := int(n.node)
		if p.done[i] {
			continue
		}
		p.done[i] = true
		r, c := i/cols, i%cols
		if c == cols-1 {
			end = i
			break
		}
		relax := func(rr, cc int) {
			if rr < lo[cc] || rr > hi[cc] {
				return
			}
			j := rr*cols + cc
			if p.done[j] {
				return
			}
			d := n.dist + 2 - (p.weight[i] + p.weight[j]) + wMin
			if d < p.dist[j] {
				p.dist[j], p.prev[j] = d, int32(i)
				p.heap.push(heapNode{d, int32(j)})
			}
		}
		relax(r-1, c+1)
		relax(r, c+1)
		relax(r+1, c+1)
		relax(r-1, c)
		relax(r+1, c)
	}
	// Walk back; on vertical runs the last row visited in a column wins,
	// which is where the path left it.
	for c := range out {
		out[c] = -1
	}
	for i := end; i >= 0; i = int(p.prev[i]) {
		if c := i % cols; out[c] < 0 {
			out[c] = i / cols
		}
	}
	for c := range out {
		if out[c] < 0 { // unreachable only if the region was cut; keep it inside
			out[c] = lo[c]
		}
	}
}

// refine returns the sub-pixel position of a boundary found at row r of
// column c: the vertex of the parabola through the gradient at r−1, r
// and r+1.
func (p *pathFinder) refine(polarity, r, c int) float32 {
	if r < p.k+1 || r+p.k+1 >= p.rows {
		return float32(r)
	}
	g := func(rr int) float32 { return float32(polarity) * p.grad[rr*p.cols+c] }
	a, b, d := g(r-1), g(r), g(r+1)
	den := a - 2*b + d
	if b <= 0 || den >= 0 {
		return float32(r)
	}
	return float32(r) + min(max(0.5*(a-d)/den, -0.5), 0.5)
}

// heapNode is a tentative distance to a node.
type heapNode struct {
	dist float32
	node int32
}

// nodeHeap is a binary min-heap on dist.
type nodeHeap []heapNode

func (h *nodeHeap) push(n heapNode) {
	*h = append(*h, n)
	a := *h
	i := len(a) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if a[parent].dist <= a[i].dist {
			break
		}
		a[parent], a[i] = a[i], a[parent]
		i = parent
	}
}

func (h *nodeHeap) pop() heapNode {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	i := 0
	for {
		l, r, small := 2*i+1, 2*i+2, i
		if l < len(a) && a[l].dist < a[small].dist {
			small = l
		}
		if r < len(a) && a[r].dist < a[small].dist {
			small = r
		}
		if small == i {
			break
		}
		a[i], a[small] = a[small], a[i]
		i = small
	}
	*h = a
	return top
}
