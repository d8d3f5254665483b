package audit

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func rec(s string) func(uint64) []byte {
	return func(seq uint64) []byte { return []byte(s) }
}

func TestConcurrentAppendsAreEachDurableAndNumberedInOrder(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(dir, 1<<20, 0, 4<<10) // small segments: several rolls
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := j.append(func(seq uint64) []byte { return []byte(strings.Repeat("x", 40+i%7) + " seq " + itoa(seq)) }, false); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	j.close()
	// Read back by a fresh journal, as after a restart.
	j2, err := openJournal(dir, 1<<20, 0, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	end, shipped := j2.durable()
	if end.Seq != 201 || shipped.Seq != 1 {
		t.Fatalf("reopened journal: end %+v shipped %+v, want 200 records from 1", end, shipped)
	}
	r := j2.reader(shipped)
	for want := uint64(1); ; want++ {
		fr, _, ok, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if want != 201 {
				t.Fatalf("read %d records, want 200", want-1)
			}
			break
		}
		if !strings.HasSuffix(string(fr), " seq "+itoa(want)) {
			t.Fatalf("record %d is %q", want, fr)
		}
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "*.audit")); len(segs) < 2 {
		t.Errorf("%d segments, want the journal to have rolled", len(segs))
	}
}

func TestATornTailIsCutAndNumberingGoesOn(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(dir, 1<<20, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := j.append(rec("whole"), false); err != nil {
			t.Fatal(err)
		}
	}
	j.close()
	// A crash in the middle of a write leaves part of a frame.
	f, _ := os.OpenFile(filepath.Join(dir, segName(1)), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("120 <85>1 torn")
	f.Close()
	j, err = openJournal(dir, 1<<20, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.append(rec("after"), false); err != nil {
		t.Fatal(err)
	}
	j.close()
	f, _ = os.Open(filepath.Join(dir, segName(1)))
	defer f.Close()
	var got []string
	br := bufio.NewReader(f)
	for {
		_, msg, err := readFrame(br)
		if err != nil {
			break
		}
		got = append(got, string(msg))
	}
	if strings.Join(got, ",") != "whole,whole,whole,after" {
		t.Errorf("segment holds %q", got)
	}
	if end, _ := j.durable(); end.Seq != 5 {
		t.Errorf("next sequence number %d, want 5", end.Seq)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// readAll reads every durable frame from p on.
func readAll(t *testing.T, j *journal, p Position) []string {
	t.Helper()
	r := j.reader(p)
	defer r.close()
	var out []string
	for {
		fr, _, ok, err := r.next()
		if err != nil {
			t.Fatalf("reading the journal from %+v: %v", p, err)
		}
		if !ok {
			return out
		}
		_, msg, _ := strings.Cut(string(fr), " ")
		out = append(out, msg)
	}
}

func TestACommittedCursorKeepsTheRecordsAfterIt(t *testing.T) {
	// Segments of about three records each; the cursor is committed in
	// the middle of each segment but the last in turn, and a restart reads
	// on from it: no record after a cursor may be lost with the segments
	// before it.
	dir := t.TempDir()
	j, err := openJournal(dir, 1<<20, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for i := range 12 {
		all = append(all, "record-"+strings.Repeat("x", 20)+itoa(uint64(i+1)))
		if err := j.append(rec(all[i]), false); err != nil {
			t.Fatal(err)
		}
	}
	if len(j.segs) < 3 {
		t.Fatalf("%d segments, want several", len(j.segs))
	}
	for k := range len(j.segs) - 1 {
		// The position after the first record of segment k.
		r := j.reader(Position{Seg: j.segs[k].first, Seq: j.segs[k].first})
		_, mid, ok, err := r.next()
		r.close()
		if err != nil || !ok {
			t.Fatalf("segment %d: %v", k, err)
		}
		if err := j.commit(mid); err != nil {
			t.Fatal(err)
		}
		j.close()
		if j, err = openJournal(dir, 1<<20, 0, 100); err != nil {
			t.Fatal(err)
		}
		_, shipped := j.durable()
		got := readAll(t, j, shipped)
		if want := all[mid.Seq-1:]; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("after a cursor committed inside segment %d of %d, the journal holds %d records, want the %d after the cursor",
				k+1, len(j.segs), len(got), len(want))
		}
	}
	j.close()
}

func TestTheJournalRefusesAMessageOverTheCollectorsBound(t *testing.T) {
	j, err := openJournal(t.TempDir(), 1<<20, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if err := j.append(rec(strings.Repeat("x", MaxMessage+1)), false); !errors.Is(err, errTooLarge) {
		t.Fatalf("a message of MaxMessage+1 bytes: %v, want it refused", err)
	}
	if err := j.append(rec(strings.Repeat("x", MaxMessage)), false); err != nil {
		t.Fatalf("a message of MaxMessage bytes: %v", err)
	}
	if end, _ := j.durable(); end.Seq != 2 {
		t.Fatalf("the refused message took a sequence number: next is %d, want 2", end.Seq)
	}
}

// writeSegment writes frames (and raw bytes) as a segment file, as an
// older build or a damaged disk left it.
func writeSegment(t *testing.T, dir string, first uint64, parts ...[]byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, segName(first)), bytes.Join(parts, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReopeningTheJournalNeverCutsAWholeRecord(t *testing.T) {
	// An older build wrote a record of 1.1 MB (over every bound now);
	// records after it were fsync'd and acknowledged. Opening the journal
	// keeps every one of them.
	dir := t.TempDir()
	huge := frame(bytes.Repeat([]byte("h"), 1100<<10))
	writeSegment(t, dir, 1, frame([]byte("one")), huge, frame([]byte("three")), frame([]byte("four")))
	before, _ := os.Stat(filepath.Join(dir, segName(1)))
	j, err := openJournal(dir, 8<<20, 0, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	after, _ := os.Stat(filepath.Join(dir, segName(1)))
	if after.Size() != before.Size() {
		t.Fatalf("opening cut the segment from %d to %d bytes", before.Size(), after.Size())
	}
	if end, _ := j.durable(); end.Seq != 5 {
		t.Fatalf("next sequence number %d, want 5 (four whole records)", end.Seq)
	}
	var aside []setAside
	j.onSetAside = func(a setAside) { aside = append(aside, a) }
	if got := readAll(t, j, Position{Seg: 1, Seq: 1}); strings.Join(got, ",") != "one,three,four" {
		t.Fatalf("the reader yields %q, want every record the collector takes and the oversized one set aside", got)
	}
	if len(aside) != 1 || aside[0].seq != 2 {
		t.Fatalf("set aside %+v, want record 2", aside)
	}
	if kept, err := os.ReadFile(aside[0].file); err != nil || !bytes.Equal(kept, huge) {
		t.Fatalf("the set-aside file holds %d bytes (%v), want the %d-byte frame exactly", len(kept), err, len(huge))
	}
}

func TestBytesThatAreNotFramesAreMovedAsideNotDropped(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail []byte
		// records is how many records of the last segment stay.
		records uint64
	}{
		{"torn by a crash", []byte("120 <85>1 torn"), 2},
		{"a torn length", []byte("12"), 2},
		{"damage", append([]byte("x\x00garbage "), frame([]byte("after damage"))...), 2},
		{"a zero length", []byte("0 "), 2},
		{"a length of eleven digits", []byte("12345678901 x"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeSegment(t, dir, 1, frame([]byte("a")), frame([]byte("b")), tc.tail)
			j, err := openJournal(dir, 1<<20, 0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer j.close()
			if end, _ := j.durable(); end.Seq != 1+tc.records {
				t.Fatalf("next sequence number %d, want %d", end.Seq, 1+tc.records)
			}
			if len(j.opened) != 1 {
				t.Fatalf("set aside at open: %+v, want the tail", j.opened)
			}
			if kept, err := os.ReadFile(j.opened[0].file); err != nil || !bytes.Equal(kept, tc.tail) {
				t.Fatalf("set-aside file %q (%v), want the tail %q exactly", kept, err, tc.tail)
			}
			if err := j.append(rec("c"), false); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, j, Position{Seg: 1, Seq: 1}); strings.Join(got, ",") != "a,b,c" {
				t.Fatalf("journal holds %q after the cut, want a,b,c", got)
			}
		})
	}
}

func TestDamageInAnEarlierSegmentIsSetAsideAndReadingGoesOn(t *testing.T) {
	dir := t.TempDir()
	writeSegment(t, dir, 1, frame([]byte("a")), []byte("\x00\x01 not a frame"), frame([]byte("lost-in-damage")))
	writeSegment(t, dir, 4, frame([]byte("d")), frame([]byte("e")))
	j, err := openJournal(dir, 1<<20, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	var aside []setAside
	j.onSetAside = func(a setAside) { aside = append(aside, a) }
	if got := readAll(t, j, Position{Seg: 1, Seq: 1}); strings.Join(got, ",") != "a,d,e" {
		t.Fatalf("the reader yields %q, want a, then the next segment's d and e", got)
	}
	if len(aside) != 1 || aside[0].seq != 2 || !strings.Contains(aside[0].reason, "records 2 to 3") {
		t.Fatalf("set aside %+v, want the rest of segment 1 (records 2 to 3)", aside)
	}
}
