package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"voxpipe/internal/atomicfile"
	"voxpipe/pacs/dicomweb"
	"voxpipe/pacs/loop"
)

// orthancFeed is `pacs watch --orthanc`'s source: the series of Orthanc's StableSeries events
// (stable: no new instance for Orthanc's StableAge), read from its /changes feed after the
// last event a covered search saw (WORKDIR/pacs/orthanc-seq; a first watch starts from now),
// with the failed series due for another try.
type orthancFeed struct {
	client   *dicomweb.Client
	modality string
	seqFile  string
	log      *slog.Logger
	retry    func() []loop.Series // failed series due again

	seq, read int // the covered sequence number, and the one read up to
	started   bool
}

const orthancPage = 100

func (o *orthancFeed) Search(ctx context.Context, _ time.Time) ([]loop.Series, error) {
	if !o.started {
		seq, err := o.load(ctx)
		if err != nil {
			return nil, err
		}
		o.seq, o.read, o.started = seq, seq, true
	}
	out := o.retry()
	for {
		changes, last, done, err := o.client.OrthancChanges(ctx, o.read, orthancPage)
		if err != nil {
			return out, err
		}
		for _, ch := range changes {
			if ch.ChangeType != "StableSeries" || ch.ResourceType != "Series" {
				continue
			}
			s, err := o.client.OrthancSeries(ctx, ch.ID)
			if errors.Is(err, dicomweb.ErrNotFound) {
				continue // deleted since
			}
			if err != nil {
				return out, err
			}
			if o.modality == "" || s.Modality == o.modality || s.Modality == "SEG" {
				out = append(out, loop.Series{StudyUID: s.StudyUID, SeriesUID: s.SeriesUID, Modality: s.Modality, Instances: s.Instances})
			}
		}
		o.read = last
		if done || len(changes) == 0 {
			return out, nil
		}
	}
}

// covered records that every series read so far is done or in the ledger's hands: a later
// watch resumes after it.
func (o *orthancFeed) covered() {
	if o.read == o.seq {
		return
	}
	if err := atomicfile.WriteBytes(o.seqFile, []byte(strconv.Itoa(o.read)+"\n")); err != nil {
		o.log.Warn("remember Orthanc's change feed position", "err", err)
		return
	}
	o.seq = o.read
}

// load is where to read the feed from: after the remembered event, or from now.
func (o *orthancFeed) load(ctx context.Context) (int, error) {
	b, err := os.ReadFile(o.seqFile)
	if err == nil {
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0, fmt.Errorf("%s: %w", o.seqFile, err)
		}
		return n, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(o.seqFile), 0o755); err != nil {
		return 0, err
	}
	last, err := o.client.OrthancLast(ctx)
	if err != nil {
		return 0, err
	}
	o.log.Info("following Orthanc's changes from now on (series already stable: pacs sync --all or --study)", "seq", last)
	return last, nil
}

func (o *orthancFeed) Retrieve(ctx context.Context, s loop.Series, dir string) ([]string, error) {
	return o.client.RetrieveSeries(ctx, s.StudyUID, s.SeriesUID, dir)
}
