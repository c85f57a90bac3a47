package main

import (
	"fmt"
	"image/color"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

var nodeColors = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 255, G: 127, B: 14, A: 255}, color.RGBA{R: 44, G: 160, B: 44, A: 255},
}

// drawChart draws, as an SVG at path and a PNG beside it, four panels over time, one line per node: data dir
// (message store solid, Raft log dashed), RSS, last snapshot's size and
// duration, and the cluster's throughput.
func drawChart(s *sampler, o *options, path string) error {
	panel := func(title, y string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "minutes"
		p.Y.Label.Text = y
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		return p
	}
	series := func(f func(sm sample) float64) plotter.XYs {
		var xy plotter.XYs
		for _, sm := range s.samples {
			xy = append(xy, plotter.XY{X: sm.at.Minutes(), Y: f(sm)})
		}
		return xy
	}
	add := func(p *plot.Plot, label string, c color.Color, dashed bool, xy plotter.XYs) error {
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = c
		l.Width = vg.Points(1.2)
		if dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(label, l)
		return nil
	}
	disk := panel(fmt.Sprintf("data dir per node: message store (solid), Raft log (dashed), all (dotted); completedRetentionSeconds %d", o.completedRetention), "MiB")
	rss := panel("RSS per node", "MiB")
	snap := panel("snapshots per node: size of the last (line, MiB) and time of each (points, ms)", "MiB / ms")
	tput := panel("cluster throughput", "messages/s")
	const mib = 1 << 20
	for i := range s.nodes {
		c := nodeColors[i%len(nodeColors)]
		name := fmt.Sprintf("n%d", i+1)
		steps := []struct {
			p      *plot.Plot
			label  string
			dashed bool
			f      func(n nodeSample) float64
		}{
			{disk, name + " store", false, func(n nodeSample) float64 { return float64(n.messages) / mib }},
			{disk, name + " raft", true, func(n nodeSample) float64 { return float64(n.raftLog) / mib }},
			{rss, name, false, func(n nodeSample) float64 { return float64(n.rss) / mib }},
			{snap, name + " size", false, func(n nodeSample) float64 { return n.snapBytes / mib }},
		}
		for _, st := range steps {
			if err := add(st.p, st.label, c, st.dashed, series(func(sm sample) float64 { return st.f(sm.nodes[i]) })); err != nil {
				return err
			}
		}
		var took plotter.XYs // a point per sample in which snapshots were taken
		for _, sm := range s.samples {
			if v := sm.nodes[i].snapSeconds; v > 0 {
				took = append(took, plotter.XY{X: sm.at.Minutes(), Y: v * 1000})
			}
		}
		if len(took) > 0 {
			sc, err := plotter.NewScatter(took)
			if err != nil {
				return err
			}
			sc.GlyphStyle.Color, sc.GlyphStyle.Radius = c, vg.Points(2)
			snap.Add(sc)
			snap.Legend.Add(name+" ms", sc)
		}
		all, err := plotter.NewLine(series(func(sm sample) float64 { return float64(sm.nodes[i].dataDir()) / mib }))
		if err != nil {
			return err
		}
		all.Color, all.Dashes = c, []vg.Length{vg.Points(1), vg.Points(2)}
		disk.Add(all)
	}
	if err := add(tput, "pushed", nodeColors[0], false, series(func(sm sample) float64 { return sm.pushRate })); err != nil {
		return err
	}
	if err := add(tput, "consumed", nodeColors[1], true, series(func(sm sample) float64 { return sm.consRate })); err != nil {
		return err
	}
	plots := [][]*plot.Plot{{disk}, {rss}, {snap}, {tput}}
	w, h := vg.Points(900), vg.Points(1200)
	for _, out := range []struct {
		path string
		c    vg.CanvasWriterTo
	}{{path, vgsvg.New(w, h)}, {strings.TrimSuffix(path, ".svg") + ".png", vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))}}} {
		dc := draw.New(out.c)
		tiles := draw.Tiles{Rows: 4, Cols: 1, PadY: vg.Points(12), PadX: vg.Points(8), PadTop: vg.Points(8), PadBottom: vg.Points(8)}
		canvases := plot.Align(plots, tiles, dc)
		for r := range plots {
			plots[r][0].Draw(canvases[r][0])
		}
		if err := writeImage(out.path, out.c); err != nil {
			return err
		}
	}
	return nil
}

func writeImage(path string, c vg.CanvasWriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := c.WriteTo(f); err != nil {
		return err
	}
	return f.Close()
}
