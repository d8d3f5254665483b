package audit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Position is a place in the journal: the segment it is in (named by
// the sequence number of its first record), the byte offset there, and
// the sequence number of the record at that offset.
type Position struct {
	Seg uint64
	Off int64
	Seq uint64
}

// journal is the append-only spool: numbered segment files of frames,
// fsync'd before Append returns, and a cursor file saying up to where
// the collector has taken them. Segments wholly before the cursor are
// deleted. One process per directory.
type journal struct {
	dir     string
	cap     int64 // bytes of unshipped records append accepts
	reserve int64 // further bytes only for the trail's own alerts
	segMax  int64

	// fileMu is held by whoever writes a batch; f and fSize are its.
	fileMu sync.Mutex
	f      *os.File
	fSize  int64

	mu      sync.Mutex
	next    uint64 // sequence number of the next record
	open    *batch // records waiting for the next write
	segs    []segment
	pending int64    // bytes in batches not yet written
	end     Position // the durable end
	shipped Position // the cursor, as last committed
	// takenAt is when the collector last took messages (zero: not
	// since this process opened the journal).
	takenAt time.Time
	broken  error // a failed write: the journal takes nothing more
	notify  chan struct{}

	// opened is what openJournal set aside; onSetAside is told of what
	// the reader sets aside later (it may append, e.g. an alert).
	opened     []setAside
	onSetAside func(setAside)
}

// setAside is bytes of the journal that could not be shipped as frames,
// kept in the spool's set-aside folder instead of being lost or sent.
type setAside struct {
	file   string // its path
	bytes  int64
	seq    uint64 // the sequence number at which they stood
	reason string
}

// setAsideDir is the spool's folder of what could not be shipped.
const setAsideDir = "set-aside"

// errTooLarge is a record over MaxMessage: the journal refuses it.
var errTooLarge = fmt.Errorf("audit: a message over the %d-byte bound", MaxMessage)

type segment struct {
	first uint64
	size  int64
}

// batch is records written and fsync'd together (group commit).
type batch struct {
	first uint64
	recs  [][]byte
	n     int64
	done  chan struct{}
	err   error
}

const cursorFile = "shipped"

func segName(first uint64) string { return fmt.Sprintf("%020d.audit", first) }

// openJournal opens (or creates) the journal in dir. Bytes at the end of
// its last segment that are not whole frames (a write a crash tore, or
// damage) are moved to the set-aside folder, never dropped, and noted
// in j.opened; whole frames of any size stay.
func openJournal(dir string, capBytes, reserve, segMax int64) (*journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit spool: %w", err)
	}
	j := &journal{dir: dir, cap: capBytes, reserve: reserve, segMax: segMax,
		open: &batch{done: make(chan struct{})}, notify: make(chan struct{}, 1)}
	names, err := filepath.Glob(filepath.Join(dir, "*.audit"))
	if err != nil {
		return nil, fmt.Errorf("audit spool: %w", err)
	}
	for _, name := range names {
		first, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(name), ".audit"), 10, 64)
		if err != nil {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			return nil, fmt.Errorf("audit spool: %w", err)
		}
		j.segs = append(j.segs, segment{first: first, size: fi.Size()})
	}
	slices.SortFunc(j.segs, func(a, b segment) int { return cmpU(a.first, b.first) })
	cur, err := j.loadCursor()
	if err != nil {
		return nil, err
	}
	j.next = max(cur.Seq, 1)
	if len(j.segs) > 0 {
		last := &j.segs[len(j.segs)-1]
		path := filepath.Join(dir, segName(last.first))
		count, size, cause, err := scanSegment(path)
		if err != nil {
			return nil, err
		}
		if size < last.size {
			aside, err := j.moveTailAside(path, last.first+count, size, last.size-size, cause)
			if err != nil {
				return nil, err
			}
			j.opened = append(j.opened, aside)
			last.size = size
		}
		j.next = last.first + count
		if j.f, err = os.OpenFile(filepath.Join(dir, segName(last.first)), os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return nil, fmt.Errorf("audit spool: %w", err)
		}
		j.fSize = last.size
		j.end = Position{Seg: last.first, Off: last.size, Seq: j.next}
	} else {
		j.end = Position{Seg: j.next, Seq: j.next}
	}
	// A cursor behind the oldest segment (or missing) starts at it.
	if len(j.segs) > 0 && (cur.Seq < j.segs[0].first || cur.Seg < j.segs[0].first) {
		cur = Position{Seg: j.segs[0].first, Seq: j.segs[0].first}
	}
	if cur.Seq == 0 || cur.Seq > j.end.Seq {
		cur = j.end
	}
	j.shipped = cur
	return j, nil
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// scanSegment counts a segment's whole frames and the bytes they take,
// and says what ended them: nil (the file's end), errTorn (a frame cut
// short by the file's end) or errGarbled (bytes that are not a frame).
// It reads no message into memory: a frame of any length is skipped.
func scanSegment(path string) (count uint64, size int64, cause, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("audit spool: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		hdr, n, err := readHeader(r)
		if err == io.EOF {
			return count, size, nil, nil
		} else if err != nil {
			return count, size, err, nil
		}
		if skipped, err := r.Discard(int(min(n, math.MaxInt32))); int64(skipped) < n {
			if err == io.EOF || err == nil {
				return count, size, errTorn, nil
			}
			return 0, 0, nil, fmt.Errorf("audit spool: %w", err)
		}
		count++
		size += int64(hdr) + n
	}
}

// moveTailAside moves the n bytes of a segment from off on to the
// set-aside folder (fsync'd there first) and cuts the segment at off.
func (j *journal) moveTailAside(path string, seq uint64, off, n int64, cause error) (setAside, error) {
	f, err := os.Open(path)
	if err != nil {
		return setAside{}, fmt.Errorf("audit spool: %w", err)
	}
	defer f.Close()
	reason := "bytes that are not a whole frame (damage) ended the journal's last segment"
	if errors.Is(cause, errTorn) {
		reason = "an unfinished write (a crash while writing) ended the journal's last segment"
	}
	aside, err := j.keepAside(fmt.Sprintf("%020d.tail", seq), io.NewSectionReader(f, off, n), n, seq, reason)
	if err != nil {
		return setAside{}, err
	}
	if err := os.Truncate(path, off); err != nil {
		return setAside{}, fmt.Errorf("audit spool: cut the segment's tail: %w", err)
	}
	return aside, nil
}

// keepAside copies n bytes of r into the set-aside folder under name and
// fsyncs them, so that they can be skipped without being lost.
func (j *journal) keepAside(name string, r io.Reader, n int64, seq uint64, reason string) (setAside, error) {
	dir := filepath.Join(j.dir, setAsideDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return setAside{}, fmt.Errorf("audit spool: %w", err)
	}
	// Never over an earlier file: sequence numbers can repeat after a
	// tail was moved aside, and a reader may meet the same frame again.
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	for k := 1; errors.Is(err, os.ErrExist) && k < 1000; k++ {
		path = filepath.Join(dir, fmt.Sprintf("%s.%d", name, k))
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		return setAside{}, fmt.Errorf("audit spool: %w", err)
	}
	_, err = io.CopyN(f, r, n)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return setAside{}, fmt.Errorf("audit spool: set aside: %w", err)
	}
	return setAside{file: path, bytes: n, seq: seq, reason: reason}, nil
}

func (j *journal) loadCursor() (Position, error) {
	b, err := os.ReadFile(filepath.Join(j.dir, cursorFile))
	if errors.Is(err, os.ErrNotExist) {
		return Position{}, nil
	} else if err != nil {
		return Position{}, fmt.Errorf("audit spool: %w", err)
	}
	var p Position
	if _, err := fmt.Sscanf(string(b), "%d %d %d", &p.Seg, &p.Off, &p.Seq); err != nil {
		return Position{}, fmt.Errorf("audit spool: cursor %q: %w", b, err)
	}
	return p, nil
}

// append writes the record build makes for the next sequence number and
// returns once it is on disk. Records past the cap are refused with
// ErrSpoolFull; alert records may use the reserve beyond it.
func (j *journal) append(build func(seq uint64) []byte, alert bool) error {
	j.mu.Lock()
	if j.broken != nil {
		j.mu.Unlock()
		return j.broken
	}
	msg := build(j.next)
	if len(msg) > MaxMessage {
		j.mu.Unlock()
		return errTooLarge
	}
	rec := frame(msg)
	limit := j.cap
	if alert {
		limit += j.reserve
	}
	if j.sizeLocked()+int64(len(rec)) > limit {
		j.mu.Unlock()
		return ErrSpoolFull
	}
	b := j.open
	if len(b.recs) == 0 {
		b.first = j.next
	}
	j.next++
	b.recs = append(b.recs, rec)
	b.n += int64(len(rec))
	j.pending += int64(len(rec))
	j.mu.Unlock()

	j.fileMu.Lock()
	defer j.fileMu.Unlock()
	j.mu.Lock()
	if b != j.open { // an earlier caller wrote our batch while we waited
		j.mu.Unlock()
		<-b.done
		return b.err
	}
	j.open = &batch{done: make(chan struct{})}
	j.mu.Unlock()

	err := j.write(b)
	j.mu.Lock()
	j.pending -= b.n
	if err != nil {
		j.broken = fmt.Errorf("audit spool: %w", err)
		err = j.broken
	} else {
		j.segs[len(j.segs)-1].size = j.fSize
		j.end = Position{Seg: j.segs[len(j.segs)-1].first, Off: j.fSize, Seq: b.first + uint64(len(b.recs))}
	}
	j.mu.Unlock()
	b.err = err
	close(b.done)
	select {
	case j.notify <- struct{}{}:
	default:
	}
	return err
}

// admit returns ErrSpoolFull unless a record of margin bytes would fit
// under the cap now, or the journal's failure.
func (j *journal) admit(margin int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken != nil {
		return j.broken
	}
	if j.sizeLocked()+margin > j.cap {
		return ErrSpoolFull
	}
	return nil
}

// undelivered is the bytes not shipped yet, and the cap.
func (j *journal) undelivered() (size, capacity int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sizeLocked(), j.cap
}

// sizeLocked is the bytes not shipped yet, written or pending. (The disk
// holds at most a segment more: the shipped head of the cursor's one.)
func (j *journal) sizeLocked() int64 {
	n := j.pending
	for _, s := range j.segs {
		n += s.size
		if s.first == j.shipped.Seg {
			n -= j.shipped.Off
		}
	}
	return n
}

// write appends a batch to the current segment, or to a new one when the
// current one is full, and fsyncs it. It runs under fileMu.
func (j *journal) write(b *batch) error {
	if j.f == nil || (j.fSize > 0 && j.fSize+b.n > j.segMax) {
		f, err := os.OpenFile(filepath.Join(j.dir, segName(b.first)), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		if err := syncDir(j.dir); err != nil {
			f.Close()
			return err
		}
		if j.f != nil {
			j.f.Close()
		}
		j.f, j.fSize = f, 0
		j.mu.Lock()
		j.segs = append(j.segs, segment{first: b.first})
		j.mu.Unlock()
	}
	buf := make([]byte, 0, b.n)
	for _, r := range b.recs {
		buf = append(buf, r...)
	}
	if _, err := j.f.Write(buf); err != nil {
		_ = j.f.Truncate(j.fSize)
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.fSize += b.n
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// durable is the journal's durable end and the committed cursor.
func (j *journal) durable() (end, shipped Position) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.end, j.shipped
}

// commit records that the collector has taken everything before p: the
// cursor is written (atomically, fsync'd) and segments wholly before p
// are deleted.
func (j *journal) commit(p Position) error {
	tmp := filepath.Join(j.dir, cursorFile+".tmp")
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d %d\n", p.Seg, p.Off, p.Seq), 0o600); err != nil {
		return fmt.Errorf("audit spool: cursor: %w", err)
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY, 0)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(j.dir, cursorFile))
	}
	if err == nil {
		err = syncDir(j.dir)
	}
	if err != nil {
		return fmt.Errorf("audit spool: cursor: %w", err)
	}
	j.mu.Lock()
	j.shipped, j.takenAt = p, time.Now()
	var gone []uint64
	for len(j.segs) > 1 && j.segs[0].first < p.Seg {
		gone = append(gone, j.segs[0].first)
		j.segs = j.segs[1:]
	}
	j.mu.Unlock()
	for _, first := range gone {
		if err := os.Remove(filepath.Join(j.dir, segName(first))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit spool: %w", err)
		}
	}
	return nil
}

// close closes the current segment.
func (j *journal) close() error {
	j.fileMu.Lock()
	defer j.fileMu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// reader reads frames from a position up to the journal's durable end.
type reader struct {
	j   *journal
	pos Position
	f   *os.File
	r   *bufio.Reader
}

func (j *journal) reader(from Position) *reader { return &reader{j: j, pos: from} }

// next returns the next durable frame and the position after it; ok is
// false when the reader is at the durable end. A frame over MaxMessage
// (no collector takes it), or bytes that are not a frame, are moved to
// the set-aside folder, the journal's onSetAside is told, and reading
// goes on after them: one bad record never stops the trail.
func (r *reader) next() (frameBytes []byte, after Position, ok bool, err error) {
	for {
		end, _ := r.j.durable()
		if r.pos.Seq >= end.Seq {
			return nil, r.pos, false, nil
		}
		if r.f == nil {
			if r.f, err = os.Open(filepath.Join(r.j.dir, segName(r.pos.Seg))); err != nil {
				return nil, r.pos, false, fmt.Errorf("audit spool: %w", err)
			}
			if _, err := r.f.Seek(r.pos.Off, io.SeekStart); err != nil {
				return nil, r.pos, false, fmt.Errorf("audit spool: %w", err)
			}
			r.r = bufio.NewReader(r.f)
		}
		hdr, n, err := readHeader(r.r)
		switch {
		case err == nil && n <= MaxMessage:
			msg := make([]byte, n)
			if _, err := io.ReadFull(r.r, msg); err != nil {
				return nil, r.pos, false, fmt.Errorf("audit spool: segment %d at %d: %w", r.pos.Seg, r.pos.Off, errTorn)
			}
			r.pos = Position{Seg: r.pos.Seg, Off: r.pos.Off + int64(hdr) + n, Seq: r.pos.Seq + 1}
			return frame(msg), r.pos, true, nil
		case err == nil:
			if err := r.setAsideFrame(hdr, n); err != nil {
				return nil, r.pos, false, err
			}
		case err == io.EOF && r.pos.Off > 0:
			// The segment is done: the next record starts the next one.
			r.close()
			r.pos = Position{Seg: r.pos.Seq, Seq: r.pos.Seq}
		case errors.Is(err, errGarbled):
			if err := r.setAsideRest(); err != nil {
				return nil, r.pos, false, err
			}
		default:
			if err == io.EOF {
				err = errors.New("empty segment")
			}
			return nil, r.pos, false, fmt.Errorf("audit spool: segment %d at %d: %w", r.pos.Seg, r.pos.Off, err)
		}
	}
}

// setAsideFrame keeps a frame over the bound (whose header was just
// read) aside and moves past it.
func (r *reader) setAsideFrame(hdr int, n int64) error {
	body := io.MultiReader(strings.NewReader(strconv.FormatInt(n, 10)+" "), r.r)
	a, err := r.j.keepAside(fmt.Sprintf("%020d.frame", r.pos.Seq), body, int64(hdr)+n, r.pos.Seq,
		fmt.Sprintf("a message of %d bytes, over the %d bytes a collector takes", n, MaxMessage))
	if err != nil {
		return err
	}
	r.pos = Position{Seg: r.pos.Seg, Off: r.pos.Off + int64(hdr) + n, Seq: r.pos.Seq + 1}
	r.j.setAsideDone(a)
	return nil
}

// setAsideRest keeps the rest of a segment that holds bytes that are not
// a frame aside and moves on to the next segment. The last segment's
// tail is checked when the journal opens and only written by it since,
// so damage there stops the reader instead.
func (r *reader) setAsideRest() error {
	next, ok := r.j.segmentAfter(r.pos.Seg)
	if !ok {
		return fmt.Errorf("audit spool: segment %d at %d: %w", r.pos.Seg, r.pos.Off, errGarbled)
	}
	path := filepath.Join(r.j.dir, segName(r.pos.Seg))
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("audit spool: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("audit spool: %w", err)
	}
	defer f.Close()
	n := fi.Size() - r.pos.Off
	a, err := r.j.keepAside(fmt.Sprintf("%020d.rest", r.pos.Seq), io.NewSectionReader(f, r.pos.Off, n), n, r.pos.Seq,
		fmt.Sprintf("bytes that are not a frame (damage); records %d to %d are in them", r.pos.Seq, next-1))
	if err != nil {
		return err
	}
	r.close()
	r.pos = Position{Seg: next, Seq: next}
	r.j.setAsideDone(a)
	return nil
}

// segmentAfter is the first record of the segment after seg, if one has
// been started.
func (j *journal) segmentAfter(seg uint64) (uint64, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range j.segs {
		if s.first > seg {
			return s.first, true
		}
	}
	return 0, false
}

func (j *journal) setAsideDone(a setAside) {
	if j.onSetAside != nil {
		j.onSetAside(a)
	}
}

func (r *reader) close() {
	if r.f != nil {
		r.f.Close()
		r.f, r.r = nil, nil
	}
}
