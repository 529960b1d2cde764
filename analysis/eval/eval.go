// Package eval scores label masks against truth masks: Dice, precision and recall per class
// (voxpipe eval).
package eval

import "fmt"

// ClassMetrics compares one class's voxels in a predicted and a reference mask.
type ClassMetrics struct {
	Pred         int64   // voxels labelled with the class in the prediction
	Truth        int64   // voxels labelled with the class in the reference
	Intersection int64   // voxels labelled with the class in both
	Dice         float64 // 2*Intersection/(Pred+Truth); 1 when both are empty
	Precision    float64 // Intersection/Pred; 1 when Pred is 0
	Recall       float64 // Intersection/Truth (sensitivity); 1 when Truth is 0
}

// ratios fills Dice, Precision and Recall from the counts.
func (c *ClassMetrics) ratios() {
	c.Dice, c.Precision, c.Recall = 1, 1, 1
	if c.Pred+c.Truth > 0 {
		c.Dice = 2 * float64(c.Intersection) / float64(c.Pred+c.Truth)
	}
	if c.Pred > 0 {
		c.Precision = float64(c.Intersection) / float64(c.Pred)
	}
	if c.Truth > 0 {
		c.Recall = float64(c.Intersection) / float64(c.Truth)
	}
}

// Metrics compares a predicted mask with a reference one.
type Metrics struct {
	Voxels     int64
	Correct    int64   // voxels with equal labels
	Accuracy   float64 // Correct/Voxels; 1 for empty masks
	OutOfRange int64   // voxels whose predicted or reference label is >= classes (counted wrong in no class)
	Classes    []ClassMetrics
}

// MeanDice averages Dice over classes first..len-1 (first = 1 skips background).
func (m Metrics) MeanDice(first int) float64 {
	if first >= len(m.Classes) {
		return 1
	}
	var sum float64
	for _, c := range m.Classes[first:] {
		sum += c.Dice
	}
	return sum / float64(len(m.Classes)-first)
}

// Compare computes per-class Dice and recall and the overall voxel accuracy of pred against
// truth. The masks must have the same length (it panics otherwise: that is a caller's bug).
func Compare(pred, truth []uint8, classes int) Metrics {
	if len(pred) != len(truth) {
		panic(fmt.Sprintf("eval.Compare: masks of %d and %d voxels", len(pred), len(truth)))
	}
	var predN, truthN, both [256]int64
	var correct, outOfRange int64
	for i, p := range pred {
		t := truth[i]
		predN[p]++
		truthN[t]++
		if p == t {
			correct++
			both[p]++
		}
		if int(p) >= classes || int(t) >= classes {
			outOfRange++
		}
	}
	m := Metrics{Voxels: int64(len(pred)), Correct: correct, Accuracy: 1, OutOfRange: outOfRange}
	if m.Voxels > 0 {
		m.Accuracy = float64(correct) / float64(m.Voxels)
	}
	m.Classes = make([]ClassMetrics, classes)
	for k := range m.Classes {
		c := &m.Classes[k]
		if k < 256 {
			c.Pred, c.Truth, c.Intersection = predN[k], truthN[k], both[k]
		}
		c.ratios()
	}
	return m
}

// Pool combines comparisons of several volumes (of the same classes) as if they were one: counts
// summed, ratios recomputed from them.
func Pool(ms []Metrics) Metrics {
	var p Metrics
	for i, m := range ms {
		if i == 0 {
			p.Classes = make([]ClassMetrics, len(m.Classes))
		}
		p.Voxels += m.Voxels
		p.Correct += m.Correct
		p.OutOfRange += m.OutOfRange
		for k, c := range m.Classes {
			p.Classes[k].Pred += c.Pred
			p.Classes[k].Truth += c.Truth
			p.Classes[k].Intersection += c.Intersection
		}
	}
	p.Accuracy = 1
	if p.Voxels > 0 {
		p.Accuracy = float64(p.Correct) / float64(p.Voxels)
	}
	for k := range p.Classes {
		p.Classes[k].ratios()
	}
	return p
}
