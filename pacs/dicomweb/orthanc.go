package dicomweb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
)

// Orthanc's own REST API, for `pacs watch --orthanc`: its /changes feed tells when a series
// is stable (no new instance for Orthanc's StableAge), which QIDO-RS cannot. The REST root is
// the DICOMweb root's parent (Orthanc serves DICOMweb at /dicom-web by default).

// Change is one event of Orthanc's /changes feed.
type Change struct {
	Seq          int
	ChangeType   string // NewInstance, NewSeries, StableSeries, StableStudy, ...
	ResourceType string // Patient, Study, Series, Instance
	ID           string // Orthanc's own identifier of the resource
}

// OrthancChanges reads the feed after seq since, one page (at most limit events). last is the
// sequence number to read after next; done tells that the feed is read to its end.
func (c *Client) OrthancChanges(ctx context.Context, since, limit int) (changes []Change, last int, done bool, err error) {
	q := url.Values{"since": {strconv.Itoa(since)}, "limit": {strconv.Itoa(limit)}}
	var page struct {
		Changes []Change
		Done    bool
		Last    int
	}
	if err := c.restJSON(ctx, q, &page, "changes"); err != nil {
		return nil, 0, false, err
	}
	return page.Changes, page.Last, page.Done, nil
}

// OrthancLast is the feed's last sequence number: where to follow it from now on.
func (c *Client) OrthancLast(ctx context.Context) (int, error) {
	var page struct{ Last int }
	if err := c.restJSON(ctx, url.Values{"last": {""}}, &page, "changes"); err != nil {
		return 0, err
	}
	return page.Last, nil
}

// OrthancSeries describes the series Orthanc knows by id: its UIDs, modality and instance count.
func (c *Client) OrthancSeries(ctx context.Context, id string) (Series, error) {
	var se struct {
		MainDicomTags struct{ SeriesInstanceUID, Modality string }
		ParentStudy   string
		Instances     []string
	}
	if err := c.restJSON(ctx, nil, &se, "series", id); err != nil {
		return Series{}, err
	}
	var st struct {
		MainDicomTags struct{ StudyInstanceUID string }
	}
	if err := c.restJSON(ctx, nil, &st, "studies", se.ParentStudy); err != nil {
		return Series{}, err
	}
	s := Series{StudyUID: st.MainDicomTags.StudyInstanceUID, SeriesUID: se.MainDicomTags.SeriesInstanceUID,
		Modality: se.MainDicomTags.Modality, Instances: len(se.Instances)}
	if checkUID(s.StudyUID) != nil || checkUID(s.SeriesUID) != nil {
		return Series{}, fmt.Errorf("%w: Orthanc series %s has no valid StudyInstanceUID or SeriesInstanceUID", ErrMalformed, id)
	}
	return s, nil
}

// restJSON GETs a path of Orthanc's REST root and decodes its JSON answer into v.
func (c *Client) restJSON(ctx context.Context, q url.Values, v any, segments ...string) error {
	u := *c.root
	u.Path = path.Dir(u.Path)
	if u.Path == "." || u.Path == "/" {
		u.Path = ""
	}
	for _, s := range segments {
		u.Path += "/" + s // Orthanc ids and route names: hex, dashes, letters
	}
	u.RawQuery = q.Encode()
	show := u.String()
	return c.do(ctx, &call{kind: REST, method: http.MethodGet, url: show, accept: "application/json",
		handle: func(resp *http.Response) error {
			if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
				return fmt.Errorf("%w: GET %s: %w", ErrMalformed, show, err)
			}
			return nil
		}})
}
