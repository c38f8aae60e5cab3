package demoagents

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/sfnt"
	"golang.org/x/image/math/fixed"
)

// Typeface selects one of the embedded Go fonts used to turn text into
// outlines, so that drawings never depend on fonts installed where they are
// viewed.
type typeface int

const (
	faceBold typeface = iota
	faceRegular
)

var (
	fontsOnce sync.Once
	fonts     [2]*sfnt.Font
	fontsErr  error
)

func loadFont(t typeface) (*sfnt.Font, error) {
	fontsOnce.Do(func() {
		for i, ttf := range [][]byte{gobold.TTF, goregular.TTF} {
			f, err := sfnt.Parse(ttf)
			if err != nil {
				fontsErr = fmt.Errorf("parse embedded font %d: %w", i, err)
				return
			}
			fonts[i] = f
		}
	})
	if fontsErr != nil {
		return nil, fontsErr
	}
	return fonts[t], nil
}

// textOutline is text laid out on one line as glyph outlines, in pixels,
// with the pen starting at x=0 on the baseline y=0 (y grows downwards).
type textOutline struct {
	segs    []outlineSeg
	advance float64 // total advance width
	ascent  float64 // positive, above the baseline
	descent float64 // positive, below the baseline
}

type outlineSeg struct {
	op   sfnt.SegmentOp
	args [3][2]float64
}

// layoutText converts text into glyph outlines at size pixels per em.
// Outlines are loaded in font units and scaled in floating point, which
// keeps sub-pixel precision at any size.
func layoutText(t typeface, text string, size float64) (textOutline, error) {
	f, err := loadFont(t)
	if err != nil {
		return textOutline{}, err
	}
	var buf sfnt.Buffer
	upem := fixed.Int26_6(f.UnitsPerEm()) << 6
	scale := size / float64(f.UnitsPerEm())
	unit := func(v fixed.Int26_6) float64 { return float64(v) / 64 * scale }

	m, err := f.Metrics(&buf, upem, font.HintingNone)
	if err != nil {
		return textOutline{}, fmt.Errorf("font metrics: %w", err)
	}
	out := textOutline{ascent: unit(m.Ascent), descent: unit(m.Descent)}
	var pen float64
	prev := sfnt.GlyphIndex(0)
	for i, r := range text {
		gi, err := f.GlyphIndex(&buf, r)
		if err != nil {
			return textOutline{}, fmt.Errorf("glyph index of %q: %w", r, err)
		}
		if i > 0 {
			// Kern fails with ErrNotFound for fonts or pairs without kerning.
			if k, err := f.Kern(&buf, prev, gi, upem, font.HintingNone); err == nil {
				pen += unit(k)
			}
		}
		segs, err := f.LoadGlyph(&buf, gi, upem, nil)
		if err != nil {
			return textOutline{}, fmt.Errorf("load glyph %q: %w", r, err)
		}
		for _, s := range segs {
			var o outlineSeg
			o.op = s.Op
			for j := range s.Args {
				o.args[j] = [2]float64{pen + unit(s.Args[j].X), unit(s.Args[j].Y)}
			}
			out.segs = append(out.segs, o)
		}
		adv, err := f.GlyphAdvance(&buf, gi, upem, font.HintingNone)
		if err != nil {
			return textOutline{}, fmt.Errorf("glyph advance %q: %w", r, err)
		}
		pen += unit(adv)
		prev = gi
	}
	out.advance = pen
	return out, nil
}

// pathData renders the outline as SVG path data, translated by (dx, dy).
// Every contour is closed with Z, which is what a fill needs.
func (o textOutline) pathData(dx, dy float64) string {
	var b strings.Builder
	open := false
	pt := func(p [2]float64) {
		b.WriteString(num(p[0] + dx))
		b.WriteByte(' ')
		b.WriteString(num(p[1] + dy))
	}
	for _, s := range o.segs {
		switch s.op {
		case sfnt.SegmentOpMoveTo:
			if open {
				b.WriteString("Z")
			}
			b.WriteString("M")
			pt(s.args[0])
			open = true
		case sfnt.SegmentOpLineTo:
			b.WriteString("L")
			pt(s.args[0])
		case sfnt.SegmentOpQuadTo:
			b.WriteString("Q")
			pt(s.args[0])
			b.WriteByte(' ')
			pt(s.args[1])
		case sfnt.SegmentOpCubeTo:
			b.WriteString("C")
			pt(s.args[0])
			b.WriteByte(' ')
			pt(s.args[1])
			b.WriteByte(' ')
			pt(s.args[2])
		}
	}
	if open {
		b.WriteString("Z")
	}
	return b.String()
}

// num formats a coordinate compactly with two decimals.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" || s == "" {
		return "0"
	}
	return s
}
