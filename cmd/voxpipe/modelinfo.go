package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"voxpipe/model"
)

// errNoCard: model info --json on a weights file written before model cards.
var errNoCard = errors.New("the weights file has no model card")

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:  "model",
			Usage: "inspect weights files",
			Subcommands: []*cli.Command{{
				Name:      "info",
				Usage:     "print a model's card: what it is, what it was trained on, where it may be trusted",
				ArgsUsage: "[FILE]",
				Description: "FILE is a .safetensors weights file; without it, the embedded default model.\n" +
					"--json prints the card alone, as stored (an error when the file has none).",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "json", Usage: "print the card as JSON"},
				},
				Action: modelInfo,
			}},
		}
	})
}

func modelInfo(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageError{fmt.Errorf("model info: one FILE at most, got %d", c.NArg())}
	}
	path := c.Args().First()
	m, name, id, err := loadModel(path)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") {
		if m.Card == nil {
			return fmt.Errorf("%s: %w", name, errNoCard)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(m.Card)
	}
	printModel(w, m, name, id.SHA256)
	return nil
}

func printModel(w io.Writer, m *model.Model, name, sha string) {
	row := func(k, format string, a ...any) { fmt.Fprintf(w, "%-15s %s\n", k, fmt.Sprintf(format, a...)) }
	row("file", "%s (sha256 %s)", name, sha)
	row("network", "attention-gate CNN, %d channels, %d classes, %d parameters", m.Channels, m.Classes, m.Parameters())
	card := m.Card
	if card == nil {
		row("card", "none: this weights file predates model cards, so voxpipe cannot check")
		row("", "spacing, orientation or intensity against its training (domain: warn)")
		row("classes", "%s", strings.Join(m.ClassNames, ", "))
		if m.Description != "" {
			row("description", "%s", m.Description)
		}
		return
	}
	row("name", "%s %s", card.Name, card.Version)
	row("modality", "%s", card.Modality)
	row("intended use", "%s", card.IntendedUse)
	row("spacing", "%s mm (x y z), orientation %s", mm3(card.SpacingMM), card.Orientation)
	row("normalization", "%s", card.Normalization)
	for i, l := range card.Labels {
		k := ""
		if i == 0 {
			k = "labels"
		}
		row(k, "%d %-12s %s%s", l.Value, l.Name, l.Color, labelCodes(l))
	}
	row("training data", "%s", card.TrainingData)
	d := card.Domain
	row("domain", "spacing %s to %s mm", mm3(d.SpacingMinMM), mm3(d.SpacingMaxMM))
	var q []string
	for i, lv := range d.QuantileLevels {
		q = append(q, fmt.Sprintf("p%g [%.2f, %.2f]", 100*lv, d.QuantileMin[i], d.QuantileMax[i]))
	}
	row("", "normalised intensity quantiles (tolerance %.2g): %s", d.QuantileTolerance, strings.Join(q, " "))
	if d.HasFOV() {
		row("", "field of view %s to %s mm (tolerance x%.3g)", mm3([3]float64(d.FOVMinMM)), mm3([3]float64(d.FOVMaxMM)), d.FOVTolerance)
	}
	if d.HasHistogram() {
		row("", "intensity histogram: %d bins, at most %.3g %% of a volume more common than in training", len(d.HistogramMax), 100*d.HistogramMaxExcess)
	}
	if k := d.Confidence; k != nil {
		row("", "confidence: mean foreground margin %.3g to %.3g logits, at most %.3g %% within 1 logit", k.MeanMarginMin, k.MeanMarginMax, 100*k.LowMarginMax)
		var f []string
		for l := range k.LabelFractionMin {
			f = append(f, fmt.Sprintf("%s [%.3g, %.3g] %%", m.LabelName(l), 100*k.LabelFractionMin[l], 100*k.LabelFractionMax[l]))
		}
		row("", "label shares: %s", strings.Join(f, " "))
	}
}

// labelCodes is what a label's codes add to its line: "  CATEGORY / TYPE", or the one it has,
// named; nothing without codes.
func labelCodes(l model.Label) string {
	switch {
	case l.Category != nil && l.Type != nil:
		return "  " + l.Category.String() + " / " + l.Type.String()
	case l.Category != nil:
		return "  category " + l.Category.String()
	case l.Type != nil:
		return "  type " + l.Type.String()
	}
	return ""
}

func mm3(s [3]float64) string { return fmt.Sprintf("%g x %g x %g", s[0], s[1], s[2]) }
