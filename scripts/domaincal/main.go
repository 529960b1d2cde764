// Command domaincal calibrates voxpipe's domain check (model.CheckDomain); run through
// scripts/domain-calibration.sh, which docs/model.md quotes:
//
//	domaincal foreign -o DIR [REAL.nii[.gz]...]
//	    writes the foreign set into DIR: CT-like Hounsfield volumes, shapes that are not heads,
//	    a mouse-sized and a whale-sized head, noise, other contrasts; REAL files (real brain
//	    images) are copied in beside them.
//	domaincal card -model IN -train DIR -o OUT
//	    computes the training statistics of the card's later domain fields (field of view,
//	    intensity histogram, the model's confidence) from the training phantoms in DIR (a
//	    voxpipe gen folder: DIR/volumes/*.nii.gz), with the CPU engine, and writes IN with them
//	    to OUT (tensors unchanged).
//	domaincal rates -in SUMMARY.csv... -foreign SUMMARY.csv... [-foreign-segmented SUMMARY.csv...]
//	    prints the false-alarm rate (volumes not ok among in-domain ones, and out-of-domain
//	    among them) and the catch rate (out-of-domain among foreign ones), one line per volume;
//	    with -foreign-segmented (foreign volumes run without --strict-domain, so all segmented),
//	    how many the model's confidence or label proportions catch on their own. Exit status 1
//	    unless no in-domain volume is out of domain and every foreign one is.
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"

	"voxpipe/model"
	"voxpipe/telemetry/timing"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: domaincal foreign|card|rates ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "foreign":
		err = foreign(os.Args[2:])
	case "card":
		err = card(os.Args[2:])
	case "rates":
		err = rates(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "domaincal:", err)
		os.Exit(1)
	}
}

// ---- rates ----

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func rates(args []string) error {
	fs := flag.NewFlagSet("rates", flag.ExitOnError)
	var in, foreignCSV, lenient list
	fs.Var(&in, "in", "summary.csv of in-domain volumes (repeatable)")
	fs.Var(&foreignCSV, "foreign", "summary.csv of foreign volumes (repeatable)")
	fs.Var(&lenient, "foreign-segmented", "summary.csv of foreign volumes all segmented (no --strict-domain): which the model's confidence catches too (repeatable)")
	fs.Parse(args)
	read := func(paths []string) ([]timing.Summary, error) {
		var all []timing.Summary
		for _, p := range paths {
			rows, err := timing.ReadSummaries(p)
			if err != nil {
				return nil, err
			}
			all = append(all, rows...)
		}
		return all, nil
	}
	inRows, err := read(in)
	if err != nil {
		return err
	}
	fRows, err := read(foreignCSV)
	if err != nil {
		return err
	}
	level := func(s timing.Summary) model.DomainLevel { return model.ParseVerdictLevel(s.Domain) }
	var ood, warn int
	for _, s := range inRows {
		switch level(s) {
		case model.DomainOutOfDomain:
			ood++
			fmt.Printf("false alarm: %s: %s [%s]\n", s.Volume, s.Domain, s.DomainEvidence)
		case model.DomainWarn:
			warn++
			fmt.Printf("in-domain warning: %s: %s [%s]\n", s.Volume, s.Domain, s.DomainEvidence)
		}
	}
	caught := 0
	for _, s := range fRows {
		if level(s) == model.DomainOutOfDomain {
			caught++
			fmt.Printf("caught: %s: %s [%s]\n", s.Volume, s.Domain, s.DomainEvidence)
		} else {
			fmt.Printf("MISSED: %s: %s [%s]\n", s.Volume, s.Domain, s.DomainEvidence)
		}
	}
	segRows, err := read(lenient)
	if err != nil {
		return err
	}
	byConf := 0
	for _, s := range segRows {
		if confidenceReason(s.Domain) {
			byConf++
			fmt.Printf("the model's confidence too: %s: [%s]\n", s.Volume, s.DomainEvidence)
		}
	}
	if len(segRows) > 0 {
		fmt.Printf("foreign, segmented: %d volumes, %d caught by the model's confidence or label proportions (%.1f %%)\n", len(segRows), byConf, pct(byConf, len(segRows)))
	}
	fmt.Printf("in-domain: %d volumes, %d out-of-domain (false-alarm rate %.1f %%), %d warn\n", len(inRows), ood, pct(ood, len(inRows)), warn)
	fmt.Printf("foreign: %d volumes, %d out-of-domain (catch rate %.1f %%)\n", len(fRows), caught, pct(caught, len(fRows)))
	if ood > 0 || caught < len(fRows) || len(inRows) == 0 || len(fRows) == 0 {
		return errors.New("rates: want no false alarm and every foreign volume caught")
	}
	return nil
}

// confidenceReason reports whether a domain column holds a reason from the model's confidence
// (segment's checkConfidence).
func confidenceReason(domain string) bool {
	for _, r := range []string{"model less sure", "model surer", "model unsure", "labels in proportions"} {
		if strings.Contains(domain, r) {
			return true
		}
	}
	return false
}

func pct(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return 100 * float64(a) / float64(b)
}
