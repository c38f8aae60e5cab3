package demoagents

import (
	"fmt"
	"image/color"
	"strconv"
	"strings"
)

// namedColors are the CSS colour keywords the specialists accept. The SVG
// skill only writes these or hex values, so the rasterizer can always read
// what it is given.
var namedColors = map[string]color.NRGBA{
	"black":   {0, 0, 0, 255},
	"white":   {255, 255, 255, 255},
	"red":     {255, 0, 0, 255},
	"green":   {0, 128, 0, 255},
	"blue":    {0, 0, 255, 255},
	"yellow":  {255, 255, 0, 255},
	"orange":  {255, 165, 0, 255},
	"purple":  {128, 0, 128, 255},
	"magenta": {255, 0, 255, 255},
	"cyan":    {0, 255, 255, 255},
	"gray":    {128, 128, 128, 255},
	"grey":    {128, 128, 128, 255},
	"silver":  {192, 192, 192, 255},
	"navy":    {0, 0, 128, 255},
	"teal":    {0, 128, 128, 255},
	"maroon":  {128, 0, 0, 255},
	"olive":   {128, 128, 0, 255},
	"lime":    {0, 255, 0, 255},
	"brown":   {165, 42, 42, 255},
	"pink":    {255, 192, 203, 255},
	"gold":    {255, 215, 0, 255},
	"indigo":  {75, 0, 130, 255},
}

// parseColor reads #rgb, #rgba, #rrggbb, #rrggbbaa, rgb()/rgba() and the
// keywords in namedColors.
func parseColor(s string) (color.NRGBA, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if c, ok := namedColors[s]; ok {
		return c, nil
	}
	if s == "currentcolor" {
		return namedColors["black"], nil
	}
	if strings.HasPrefix(s, "#") {
		h := s[1:]
		if len(h) == 3 || len(h) == 4 {
			var b strings.Builder
			for _, r := range h {
				b.WriteRune(r)
				b.WriteRune(r)
			}
			h = b.String()
		}
		if len(h) == 6 {
			h += "ff"
		}
		if len(h) == 8 {
			v, err := strconv.ParseUint(h, 16, 32)
			if err == nil {
				return color.NRGBA{uint8(v >> 24), uint8(v >> 16), uint8(v >> 8), uint8(v)}, nil
			}
		}
	}
	if strings.HasPrefix(s, "rgb(") || strings.HasPrefix(s, "rgba(") {
		inner := s[strings.IndexByte(s, '(')+1:]
		inner = strings.TrimSuffix(inner, ")")
		parts := strings.FieldsFunc(inner, func(r rune) bool { return r == ',' || r == ' ' || r == '/' })
		if len(parts) == 3 || len(parts) == 4 {
			var v [4]float64
			v[3] = 1
			ok := true
			for i, p := range parts {
				pct := strings.HasSuffix(p, "%")
				f, err := strconv.ParseFloat(strings.TrimSuffix(p, "%"), 64)
				if err != nil {
					ok = false
					break
				}
				if pct {
					f = f / 100
					if i < 3 {
						f *= 255
					}
				}
				v[i] = f
			}
			if ok {
				cl := func(f, max float64) uint8 {
					if f < 0 {
						f = 0
					}
					if f > max {
						f = max
					}
					return uint8(f / max * 255)
				}
				return color.NRGBA{cl(v[0], 255), cl(v[1], 255), cl(v[2], 255), cl(v[3], 1)}, nil
			}
		}
	}
	if strings.HasPrefix(s, "url(") {
		return color.NRGBA{}, fmt.Errorf("%w: gradient and pattern fills (%s) are not supported", ErrUnsupportedSVG, s)
	}
	return color.NRGBA{}, fmt.Errorf("%w: unknown colour %q", ErrUnsupportedSVG, s)
}
