package main

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/urfave/cli/v2"

	"voxpipe/io/nifti"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:      "info",
		Usage:     "print a volume's header, geometry and value range",
		ArgsUsage: "FILE...",
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usageError{errors.New("info: give at least one NIfTI file")}
			}
			failed := 0
			for _, path := range c.Args().Slice() {
				if err := printInfo(c.App.Writer, path); err != nil {
					fmt.Fprintln(c.App.ErrWriter, "voxpipe:", err)
					failed++
				}
			}
			if failed > 0 {
				return cli.Exit("", exitFailed)
			}
			return nil
		},
	})
}

func printInfo(w io.Writer, path string) error {
	r, err := nifti.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	h := r.Header()
	order := "little-endian"
	if h.ByteOrder != nil && h.ByteOrder.String() == "BigEndian" {
		order = "big-endian"
	}
	fmt.Fprintf(w, "%s\n", path)
	fmt.Fprintf(w, "  format      NIfTI-%d (%s, magic %q)\n", h.Version, order, h.Magic)
	fmt.Fprintf(w, "  dims        %dx%dx%d (dim %v)\n", h.NX(), h.NY(), h.NZ(), h.Dim[:h.Dim[0]+1])
	fmt.Fprintf(w, "  datatype    %s (%d bits)\n", h.Datatype, h.BitPix)
	fmt.Fprintf(w, "  pixdim      %g x %g x %g (xyzt_units %d)\n", h.PixDim[1], h.PixDim[2], h.PixDim[3], h.XYZTUnits)
	slope, inter := r.Scaling()
	fmt.Fprintf(w, "  scaling     slope %g, inter %g (header: %g, %g)\n", slope, inter, h.SclSlope, h.SclInter)
	fmt.Fprintf(w, "  qform       code %d, quatern (%g, %g, %g), offset (%g, %g, %g), qfac %g\n",
		h.QformCode, h.QuaternB, h.QuaternC, h.QuaternD, h.QoffsetX, h.QoffsetY, h.QoffsetZ, h.PixDim[0])
	fmt.Fprintf(w, "  sform       code %d\n", h.SformCode)
	for _, row := range [][4]float64{h.SrowX, h.SrowY, h.SrowZ} {
		fmt.Fprintf(w, "              [% .6g % .6g % .6g % .6g]\n", row[0], row[1], row[2], row[3])
	}
	fmt.Fprintf(w, "  intent      code %d %q\n", h.IntentCode, h.IntentName)
	fmt.Fprintf(w, "  descrip     %q\n", h.Descrip)
	fmt.Fprintf(w, "  vox_offset  %d\n", h.VoxOffset)

	// Value range of the scaled values, read slab by slab so huge volumes need no big buffer.
	plane := r.SliceVoxels()
	const slab = 16
	buf := make([]float32, plane*slab)
	lo, hi := math.Inf(1), math.Inf(-1)
	var sum float64
	var n int64
	for {
		k, err := r.ReadSlicesFloat32(buf, slab)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		for _, v := range buf[:k*plane] {
			x := float64(v)*slope + inter
			lo, hi = math.Min(lo, x), math.Max(hi, x)
			sum += x
		}
		n += int64(k * plane)
	}
	if n > 0 {
		fmt.Fprintf(w, "  values      min %g, max %g, mean %g (%d voxels, scaled)\n", lo, hi, sum/float64(n), n)
	}
	return nil
}
