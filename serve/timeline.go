package serve

import (
	"fmt"
	"strings"
	"time"

	"github.com/certwatch/certwatch/policy"
)

// The timeline is an inline SVG bar chart of the findings' deadlines: one
// bar for what is already due, then one per week of the next 13 (91 days),
// each stacked by tier. It counts findings, as the header's badges do, not
// rows: a certificate with two warnings is two in both, and a certificate
// without a finding is in neither. Its coordinate space is about as wide as a phone's
// screen, so at 390 px its text is drawn at its nominal size; on a wide
// screen CSS caps its width. No script, no external asset.
const (
	timelineWeeks  = 13
	timelineSlot   = 25.0 // width of one bar and its gap
	timelineBarW   = 19.0
	timelineLeft   = 4.0
	timelineTop    = 16.0 // room for the counts above the bars
	timelineChartH = 100.0
	timelineBottom = 30.0 // room for the week labels
)

// timeline is the chart, laid out.
type timeline struct {
	Width, Height float64
	// Label describes the chart for screen readers and as its title.
	Label string
	// Base is the y of the bars' foot.
	Base   float64
	Bars   []timelineBar
	Legend []option // Label: tier, Value: count
}

type timelineBar struct {
	X, CountY, LabelX, LabelY float64
	Label                     string // week start ("Dec 8"), or "due" for the first bar
	Total                     int
	Title                     string // "week of 2030-01-08: 2 page, 1 notice"
	Segs                      []timelineSeg
}

type timelineSeg struct {
	Y, H float64
	Tier string
}

// timelineCounts counts the deadlines of findings relative to now, each
// at its own tier, a row's findings at a time (add), for the timeline
// (layout).
type timelineCounts struct {
	now    time.Time
	counts []map[policy.Tier]int
	totals map[policy.Tier]int
	n      int
}

func newTimelineCounts(now time.Time) timelineCounts {
	t := timelineCounts{now: now, counts: make([]map[policy.Tier]int, timelineWeeks+1), totals: map[policy.Tier]int{}}
	for i := range t.counts {
		t.counts[i] = map[policy.Tier]int{}
	}
	return t
}

// add counts the deadlines of fs.
func (t *timelineCounts) add(fs []*policy.Finding) {
	const week = 7 * 24 * time.Hour
	for _, f := range fs {
		d := f.Deadline.Sub(t.now) // saturates for far dates, which fall outside
		bucket := 0
		if d >= 0 {
			if d >= timelineWeeks*week {
				continue
			}
			bucket = 1 + int(d/week)
		}
		t.counts[bucket][f.Tier]++
		t.totals[f.Tier]++
		t.n++
	}
}

// layout lays the counts out, or returns nil when none is due within the
// 91 days.
func (tc *timelineCounts) layout() *timeline {
	const week = 7 * 24 * time.Hour
	counts, totals, n, now := tc.counts, tc.totals, tc.n, tc.now
	if n == 0 {
		return nil
	}
	most := 0
	for _, c := range counts {
		sum := 0
		for _, v := range c {
			sum += v
		}
		most = max(most, sum)
	}
	t := &timeline{
		Width:  timelineLeft*2 + timelineSlot*float64(timelineWeeks+1),
		Height: timelineTop + timelineChartH + timelineBottom,
		Base:   timelineTop + timelineChartH,
		Label:  fmt.Sprintf("Findings by deadline in the next 90 days, by week: %d due now or overdue, %d in the 13 weeks after", sum(counts[0]), n-sum(counts[0])),
	}
	for b, c := range counts {
		x := timelineLeft + timelineSlot*float64(b) + (timelineSlot-timelineBarW)/2
		bar := timelineBar{X: x, LabelX: x + timelineBarW/2, LabelY: t.Base + 13}
		start := now.Add(time.Duration(b-1) * week)
		switch {
		case b == 0:
			bar.Label = "due"
			bar.Title = "due now or overdue"
		default:
			bar.Title = "week of " + start.UTC().Format(time.DateOnly)
			if b%2 == 0 { // every other week, so labels do not collide
				bar.Label = start.UTC().Format("Jan 2")
			}
		}
		y := t.Base
		var parts []string
		for tier := policy.Critical; tier >= policy.None; tier-- {
			v := c[tier]
			if v == 0 {
				continue
			}
			h := timelineChartH * float64(v) / float64(most)
			y -= h
			bar.Segs = append(bar.Segs, timelineSeg{Y: y, H: h, Tier: tierName(tier)})
			bar.Total += v
			parts = append(parts, fmt.Sprintf("%d %s", v, tierName(tier)))
		}
		if len(parts) > 0 {
			bar.Title += ": " + strings.Join(parts, ", ")
		}
		bar.CountY = y - 4
		t.Bars = append(t.Bars, bar)
	}
	for tier := policy.Critical; tier >= policy.None; tier-- {
		if totals[tier] > 0 {
			t.Legend = append(t.Legend, option{Label: tierName(tier), Value: fmt.Sprint(totals[tier])})
		}
	}
	return t
}

func sum(m map[policy.Tier]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
