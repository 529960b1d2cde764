package dicomweb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// seriesJSON is a QIDO-RS result for series i, with IS values as numbers when numeric.
func seriesJSON(i int, numeric bool) map[string]any {
	num := func(n int) any {
		if numeric {
			return n
		}
		return strconv.Itoa(n)
	}
	return map[string]any{
		"0020000D": map[string]any{"vr": "UI", "Value": []any{"1.2.3"}},
		"0020000E": map[string]any{"vr": "UI", "Value": []any{fmt.Sprintf("1.2.3.%d", i)}},
		"00080060": map[string]any{"vr": "CS", "Value": []any{"MR"}},
		"00200011": map[string]any{"vr": "IS", "Value": []any{num(i)}},
		"00201209": map[string]any{"vr": "IS", "Value": []any{num(10 + i)}},
		"00080021": map[string]any{"vr": "DA", "Value": []any{"20261204"}},
		"00080031": map[string]any{"vr": "TM", "Value": []any{"101500"}},
		"0008103E": map[string]any{"vr": "LO"}, // present without a value
	}
}

func TestSearchSeriesPages(t *testing.T) {
	t.Parallel()
	const total = 7
	var mu sync.Mutex
	var queries []string
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		if r.URL.Path != "/dicom-web/series" || r.Header.Get("Accept") != "application/dicom+json" {
			http.Error(w, "bad path or accept "+r.URL.Path, 400)
			return
		}
		q := r.URL.Query()
		limit, _ := strconv.Atoi(q.Get("limit"))
		offset, _ := strconv.Atoi(q.Get("offset"))
		var page []map[string]any
		for i := offset; i < total && i < offset+limit; i++ {
			page = append(page, seriesJSON(i, i%2 == 0))
		}
		w.Header().Set("Content-Type", "application/dicom+json")
		json.NewEncoder(w).Encode(page)
	})
	c, _ := testClient(t, srv.URL+"/dicom-web/", nil)
	since := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	got, err := c.SearchSeries(context.Background(), SeriesQuery{Modality: "MR", Since: since, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != total {
		t.Fatalf("%d series, want %d", len(got), total)
	}
	for i, s := range got {
		want := Series{StudyUID: "1.2.3", SeriesUID: fmt.Sprintf("1.2.3.%d", i), Modality: "MR",
			Number: i, Instances: 10 + i, Date: "20261204", Time: "101500"}
		if s != want {
			t.Errorf("series %d: %+v, want %+v", i, s, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queries) != 3 {
		t.Fatalf("%d requests, want 3 (pages of 3, 3, 1): %q", len(queries), queries)
	}
	for i, q := range queries {
		for _, want := range []string{"Modality=MR", "StudyDate=20261201-", "limit=3",
			fmt.Sprintf("offset=%d", 3*i), "includefield=0020000D,0020000E,00080060"} { // commas as they are: Orthanc reads %2C as one tag
			if !strings.Contains(q, want) {
				t.Errorf("query %d %q lacks %q", i, q, want)
			}
		}
	}
}

func TestSearchSeriesOfStudy(t *testing.T) {
	t.Parallel()
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/dicom-web/studies/1.2.3/series" {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Has("Modality") || r.URL.Query().Has("StudyDate") {
			http.Error(w, "unexpected filter", 400)
			return
		}
		// Lower-case tags, a study date only, a number with a fraction, extra attributes.
		w.Write([]byte(`[{"0020000d":{"vr":"UI","Value":["1.2.3"]},"0020000E":{"vr":"UI","Value":["1.2.3.9"]},
			"00080020":{"vr":"DA","Value":["20261130"]},"00080030":{"vr":"TM","Value":["0800"]},
			"00200011":{"vr":"IS","Value":[4.0]},"00201209":{"vr":"IS","Value":[" 12 "]},
			"0008103E":{"vr":"LO","Value":["t1 mprage"]},"00100010":{"vr":"PN","Value":[{"Alphabetic":"X^Y"}]}}]`))
	})
	c, _ := testClient(t, srv.URL+"/dicom-web", nil)
	got, err := c.SearchSeries(context.Background(), SeriesQuery{StudyUID: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Series{{StudyUID: "1.2.3", SeriesUID: "1.2.3.9", Description: "t1 mprage", Number: 4,
		Instances: 12, Date: "20261130", Time: "0800"}}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := c.SearchSeries(context.Background(), SeriesQuery{StudyUID: "1.2/../x"}); err == nil {
		t.Error("a study UID with a slash was accepted")
	}
}

func TestSearchSeriesEmptyAndUnpaged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		code, want int
	}{
		{"empty array", "[]", 200, 0},
		{"no content", "", 204, 0},
		// A server that ignores limit answers more than a page: read once, not forever.
		{"ignores paging", `[` + strings.Repeat(`{"0020000D":{"Value":["1"]},"0020000E":{"Value":["2"]}},`, 4) +
			`{"0020000D":{"Value":["1"]},"0020000E":{"Value":["3"]}}]`, 200, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, calls := countHandler(func(_ int, w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.code)
				w.Write([]byte(tc.body))
			})
			srv := server(t, h)
			c, _ := testClient(t, srv.URL, nil)
			got, err := c.SearchSeries(context.Background(), SeriesQuery{Limit: 2})
			if err != nil || len(got) != tc.want || calls() != 1 {
				t.Errorf("got %d series, err %v, %d calls; want %d, nil, 1", len(got), err, calls(), tc.want)
			}
		})
	}
}

func TestSearchSeriesMalformed(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"not json":      `<html>oops</html>`,
		"an object":     `{"0020000E":{"vr":"UI","Value":["1"]}}`,
		"no series uid": `[{"0020000D":{"vr":"UI","Value":["1.2"]}}]`,
		"cut short":     `[{"0020000D":{"vr":"UI","Value":["1.2"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := server(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) })
			c, rec := testClient(t, srv.URL, nil)
			_, err := c.SearchSeries(context.Background(), SeriesQuery{})
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("err %v, want ErrMalformed", err)
			}
			if reqs := rec.requests(); len(reqs) != 1 || reqs[0].Class != ClassMalformed {
				t.Errorf("attempts %+v, want one, malformed (never retried)", reqs)
			}
		})
	}
}
