package dicomweb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultPageSize is SeriesQuery.Limit's default.
const DefaultPageSize = 100

// SeriesQuery selects series for SearchSeries; zero fields match everything.
type SeriesQuery struct {
	Modality string    // e.g. MR
	StudyUID string    // only this study's series
	Since    time.Time // StudyDate on or after Since's date (in Since's location); zero: any date
	Limit    int       // page size; 0: DefaultPageSize
}

// Series is one series a search found.
type Series struct {
	StudyUID, SeriesUID, Modality, Description string
	Number, Instances                          int
	Date, Time                                 string // SeriesDate and SeriesTime, else the study's; DICOM DA/TM
}

// seriesFields are the attributes SearchSeries asks for with includefield.
var seriesFields = []string{tagStudyUID, tagSeriesUID, tagModality, tagSeriesDesc, tagSeriesNumber,
	tagSeriesInstances, tagSeriesDate, tagSeriesTime, tagStudyDate, tagStudyTime}

// SearchSeries finds series with QIDO-RS: GET {root}/series, or {root}/studies/{uid}/series
// when q.StudyUID is set, page by page (limit, offset) until a short page. A series seen on an
// earlier page is not listed twice; a server that ignores paging is read once.
func (c *Client) SearchSeries(ctx context.Context, q SeriesQuery) ([]Series, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultPageSize
	}
	segments := []string{"series"}
	if q.StudyUID != "" {
		if err := checkUID(q.StudyUID); err != nil {
			return nil, err
		}
		segments = []string{"studies", q.StudyUID, "series"}
	}
	params := url.Values{}
	if q.Modality != "" {
		params.Set("Modality", q.Modality)
	}
	if !q.Since.IsZero() {
		params.Set("StudyDate", q.Since.Format("20060102")+"-")
	}
	params.Set("limit", strconv.Itoa(limit))
	var out []Series
	seen := map[string]bool{}
	for offset := 0; ; {
		params.Set("offset", strconv.Itoa(offset))
		show := c.endpoint(params, segments...)
		// The fields comma-separated as they are: Orthanc's plugin reads an escaped comma
		// (%2C) as part of one unknown tag and falls back to its default fields.
		page, err := c.searchPage(ctx, show+"&includefield="+strings.Join(seriesFields, ","), show)
		if err != nil {
			return out, err
		}
		added := 0
		for _, s := range page {
			if !seen[s.SeriesUID] {
				seen[s.SeriesUID] = true
				out = append(out, s)
				added++
			}
		}
		if len(page) != limit || added == 0 {
			return out, nil
		}
		offset += len(page)
	}
}

// searchPage runs one QIDO-RS request and decodes its series.
// show is u without its includefield, for messages.
func (c *Client) searchPage(ctx context.Context, u, show string) ([]Series, error) {
	var page []Series
	err := c.do(ctx, &call{kind: QIDO, method: http.MethodGet, url: u, show: show, accept: "application/dicom+json",
		handle: func(resp *http.Response) error {
			var err error
			page, err = decodeSeries(resp)
			if err != nil {
				return fmt.Errorf("%w: GET %s: %w", ErrMalformed, show, err)
			}
			return nil
		}})
	return page, err
}

// decodeSeries reads a QIDO-RS answer: a DICOM JSON array, or nothing (204, or an empty body).
func decodeSeries(resp *http.Response) ([]Series, error) {
	if resp.StatusCode == http.StatusNoContent {
		return nil, nil
	}
	var sets []dataset
	err := json.NewDecoder(resp.Body).Decode(&sets)
	if errors.Is(err, io.EOF) { // an empty body
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]Series, 0, len(sets))
	for i, d := range sets {
		s := Series{StudyUID: d.str(tagStudyUID), SeriesUID: d.str(tagSeriesUID),
			Modality: d.str(tagModality), Description: d.str(tagSeriesDesc),
			Number: d.int(tagSeriesNumber), Instances: d.int(tagSeriesInstances),
			Date: d.str(tagSeriesDate), Time: d.str(tagSeriesTime)}
		if s.Date == "" {
			s.Date, s.Time = d.str(tagStudyDate), d.str(tagStudyTime)
		}
		if s.SeriesUID == "" || s.StudyUID == "" {
			return nil, fmt.Errorf("result %d has no StudyInstanceUID or SeriesInstanceUID", i)
		}
		out = append(out, s)
	}
	return out, nil
}

// checkUID refuses what is not a DICOM UID (digits and dots, at most 64), so that no caller's
// string can reach into another path of the server.
func checkUID(uid string) error {
	ok := uid != "" && len(uid) <= 64
	for _, r := range uid {
		ok = ok && (r == '.' || r >= '0' && r <= '9')
	}
	if !ok {
		return fmt.Errorf("dicomweb: %q is not a DICOM UID", uid)
	}
	return nil
}
