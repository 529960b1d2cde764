package jpeg

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// withRestarts transcodes a one-component sequential DCT stream to one with a restart
// interval of every MCUs: the same coefficients (read with the package's reference reader),
// entropy-coded again with optimal tables for the new symbols (a DC difference after a
// restart may be of a size the original's optimized table lacks), an RSTm after each
// interval. dcmtk writes no restart markers; dcmdjpeg checks the result independently.
func withRestarts(t *testing.T, src []byte, w, h, every int) []byte {
	t.Helper()
	hd, err := parseHeader(src)
	if err != nil {
		t.Fatal(err)
	}
	dc, err1 := tables(&hd.dc, hd.td, "DC")
	ac, err2 := tables(&hd.ac, hd.ta, "AC")
	if err1 != nil || err2 != nil || hd.info.RestartInterval != 0 {
		t.Fatalf("%v, %v, restart interval %d", err1, err2, hd.info.RestartInterval)
	}
	r := &refReader{src: src, pos: hd.scan}
	blocks := make([][64]int32, ((w+7)/8)*((h+7)/8))
	pred := int32(0)
	for n := range blocks {
		if err := decodeBlock(r, dc, ac, &pred, &blocks[n]); err != nil {
			t.Fatal(err)
		}
	}
	var dcFreq, acFreq [256]int
	emitBlocks(blocks, every, func(dc bool, sym int, _ uint32, _ int) {
		if dc {
			dcFreq[sym]++
		} else if sym >= 0 {
			acFreq[sym]++
		}
	})
	dcCounts, dcVals := optimalTable(dcFreq[:])
	acCounts, acVals := optimalTable(acFreq[:])
	dcCodes, dcLens := canonicalCodes(dcCounts, dcVals)
	acCodes, acLens := canonicalCodes(acCounts, acVals)
	out := append(bytes.Clone(src[:2]), 0xFF, 0xDD, 0, 4, byte(every>>8), byte(every))
	out = appendSegment(out, 0xC4, append(append([]byte{0x00}, dcCounts[1:]...), dcVals...))
	out = appendSegment(out, 0xC4, append(append([]byte{0x10}, acCounts[1:]...), acVals...))
	for pos := 2; pos < hd.scan; { // the original's segments but its tables
		n := int(binary.BigEndian.Uint16(src[pos+2:]))
		if src[pos+1] != 0xC4 {
			out = append(out, src[pos:pos+2+n]...)
		}
		pos += 2 + n
	}
	out[len(out)-4] = 0x00 // the scan's tables: DC 0, AC 0 (Td/Ta of its one component)
	bw := &bitWriter{out: out}
	emitBlocks(blocks, every, func(dc bool, sym int, bits uint32, size int) {
		switch {
		case sym < 0: // a restart marker
			bw.flush()
			bw.out = append(bw.out, 0xFF, byte(0xD0+size%8))
		case dc:
			bw.put(dcCodes[sym], dcLens[sym])
		default:
			bw.put(acCodes[sym], acLens[sym])
		}
		if sym >= 0 {
			bw.put(bits, uint(size))
		}
	})
	bw.flush()
	return append(bw.out, 0xFF, 0xD9)
}

// emitBlocks walks the blocks' symbols as a sequential Huffman encoder codes them, with a
// restart interval of every blocks: for each, emit(dc, symbol, extra bits, their count); a
// restart is emit(false, -1, 0, m) for RSTm.
func emitBlocks(blocks [][64]int32, every int, emit func(dc bool, sym int, bits uint32, size int)) {
	prev := int32(0)
	for n, coef := range blocks {
		if n > 0 && n%every == 0 {
			emit(false, -1, 0, n/every-1)
			prev = 0
		}
		s, bits := dctCategory(coef[0] - prev)
		prev = coef[0]
		emit(true, s, bits, s)
		run := 0
		for k := 1; k < 64; k++ {
			v := coef[zigzag[k]]
			if v == 0 {
				run++
				continue
			}
			for ; run >= 16; run -= 16 {
				emit(false, 0xF0, 0, 0)
			}
			s, bits := dctCategory(v)
			emit(false, run<<4|s, bits, s)
			run = 0
		}
		if run > 0 {
			emit(false, 0x00, 0, 0) // EOB
		}
	}
}

// dctCategory is a DCT coefficient's (or DC difference's) size category and its extra bits.
func dctCategory(v int32) (int, uint32) {
	s := 0
	for a := max(v, -v); a>>s != 0; {
		s++
	}
	if v < 0 {
		v--
	}
	return s, uint32(v) & (1<<s - 1)
}

// TestDCTRestarts adds restart intervals to dcmcjpeg's baseline and extended streams: dcmdjpeg
// must decode the result as it decodes the original, and so must this package.
func TestDCTRestarts(t *testing.T) {
	t.Parallel()
	requireTool(t, "dcmcjpeg")
	requireTool(t, "dcmdjpeg")
	for i, c := range []struct {
		allocated, stored, every int
		args                     string
	}{{8, 8, 1, "+eb"}, {8, 8, 5, "+ee"}, {16, 12, 3, "+ee"}, {16, 12, 7, "+ee +q 60"}, {16, 12, 100, "+ee"}} {
		t.Run(fmt.Sprintf("%d-bit-every%d-%s", c.stored, c.every, c.args), func(t *testing.T) {
			t.Parallel()
			im := testImage(53+i, 35, 1, c.allocated, c.stored, false, uint64(400+i))
			encoded := convert(t, im.file(), "dcmcjpeg", strings.Fields(c.args)...)
			stream := withRestarts(t, frameStreams(t, encoded)[0], im.w, im.h, c.every)
			if in, err := ReadInfo(stream); err != nil || in.RestartInterval != c.every {
				t.Fatalf("%+v, %v", in, err)
			}
			syntax := "1.2.840.10008.1.2.4.51"
			if c.stored == 8 {
				syntax = "1.2.840.10008.1.2.4.50"
			}
			im.syntax, im.encapsulated, im.frames = syntax, [][]byte{stream}, 1
			// The original's decoding by dcmdjpeg, against which the transcoded stream's
			// decodings (dcmdjpeg's and ours) are compared.
			want := nativePixels(t, convert(t, encoded, "dcmdjpeg", "+te"))
			got := nativePixels(t, convert(t, im.file(), "dcmdjpeg", "+te"))
			if !bytes.Equal(got, want) {
				t.Fatalf("dcmdjpeg decodes the transcoded stream differently (first at byte %d)", firstDiff(got, want))
			}
			checkAgainstDcmdjpeg(t, im.file(), im.w, im.h, Baseline, Extended)
		})
	}
}
