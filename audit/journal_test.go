package audit

import (
	"bufio"
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
