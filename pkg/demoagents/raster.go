package demoagents

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"io"
	"math"
	"strconv"
	"strings"

	"golang.org/x/image/vector"
)

// ErrUnsupportedSVG is returned for SVG input the rasterizer cannot draw
// faithfully: broken XML, no <svg> root, or features it does not implement.
// Its message is meant for the model and the user.
var ErrUnsupportedSVG = errors.New("unsupported SVG")

// maxRasterSide bounds the PNG size so one request cannot exhaust memory.
const maxRasterSide = 4096

// affine is a 2-D affine transform [a c e; b d f].
type affine [6]float64

var identity = affine{1, 0, 0, 1, 0, 0}

// mul returns m·n (n applied first).
func (m affine) mul(n affine) affine {
	return affine{
		m[0]*n[0] + m[2]*n[1],
		m[1]*n[0] + m[3]*n[1],
		m[0]*n[2] + m[2]*n[3],
		m[1]*n[2] + m[3]*n[3],
		m[0]*n[4] + m[2]*n[5] + m[4],
		m[1]*n[4] + m[3]*n[5] + m[5],
	}
}

func (m affine) apply(x, y float64) (float32, float32) {
	return float32(m[0]*x + m[2]*y + m[4]), float32(m[1]*x + m[3]*y + m[5])
}

// svgDoc is what the rasterizer understands of an SVG document.
type svgDoc struct {
	width, height float64    // intrinsic size in px
	viewBox       [4]float64 // min-x, min-y, width, height
	shapes        []shape
}

// shape is one filled outline in user space with its final transform.
type shape struct {
	cmds  []pathCmd
	xf    affine
	color color.NRGBA
}

// pathCmd is an absolute path command: 'M', 'L', 'Q', 'C' or 'Z'.
type pathCmd struct {
	op  byte
	pts [3][2]float64
}

// style is the inherited presentation state.
type style struct {
	fill    string
	opacity float64 // fill-opacity × opacity
	xf      affine
}

// parseSVG reads the subset of SVG the demo specialists produce and
// common editors write: <svg> with viewBox/width/height, <g>, <path>,
// <rect>, <circle>, <ellipse>, transforms, and solid fills.
func parseSVG(data []byte) (*svgDoc, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	var doc *svgDoc
	stack := []style{}
	skipDepth := 0 // >0 while inside an element whose content is not rendered
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: the file is not well-formed XML (%v)", ErrUnsupportedSVG, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if skipDepth > 0 {
				skipDepth++
				continue
			}
			name := t.Name.Local
			attrs := attrMap(t.Attr)
			if doc == nil {
				if name != "svg" {
					return nil, fmt.Errorf("%w: the root element is <%s>, not <svg>", ErrUnsupportedSVG, name)
				}
				d, err := parseRoot(attrs)
				if err != nil {
					return nil, err
				}
				doc = d
				st, err := childStyle(style{fill: "black", opacity: 1, xf: identity}, attrs)
				if err != nil {
					return nil, err
				}
				stack = append(stack, st)
				continue
			}
			parent := stack[len(stack)-1]
			st, err := childStyle(parent, attrs)
			if err != nil {
				return nil, err
			}
			switch name {
			case "g", "a", "svg":
				stack = append(stack, st)
				continue
			case "title", "desc", "metadata", "defs", "style", "clipPath", "mask", "symbol", "linearGradient", "radialGradient", "pattern", "marker", "filter":
				// Not rendered directly; <defs> content only matters through <use>.
				skipDepth = 1
				continue
			case "path":
				cmds, err := parsePathData(attrs["d"])
				if err != nil {
					return nil, err
				}
				if err := doc.add(cmds, st); err != nil {
					return nil, err
				}
			case "rect":
				if err := doc.add(rectPath(attrs), st); err != nil {
					return nil, err
				}
			case "circle":
				r := attrNum(attrs["r"], 0)
				if err := doc.add(ellipsePath(attrNum(attrs["cx"], 0), attrNum(attrs["cy"], 0), r, r), st); err != nil {
					return nil, err
				}
			case "ellipse":
				if err := doc.add(ellipsePath(attrNum(attrs["cx"], 0), attrNum(attrs["cy"], 0), attrNum(attrs["rx"], 0), attrNum(attrs["ry"], 0)), st); err != nil {
					return nil, err
				}
			case "polygon":
				cmds, err := polygonPath(attrs["points"])
				if err != nil {
					return nil, err
				}
				if err := doc.add(cmds, st); err != nil {
					return nil, err
				}
			case "text", "image", "use", "foreignObject":
				return nil, fmt.Errorf("%w: <%s> elements are not supported; text must be drawn as paths (create_svg_artifact does that)", ErrUnsupportedSVG, name)
			default:
				// Unknown elements (e.g. line, polyline: stroke-only) draw nothing.
			}
			stack = append(stack, st)
		case xml.EndElement:
			if skipDepth > 0 {
				skipDepth--
				continue
			}
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if doc == nil {
		return nil, fmt.Errorf("%w: no <svg> element found", ErrUnsupportedSVG)
	}
	if len(doc.shapes) == 0 {
		return nil, fmt.Errorf("%w: the SVG contains no filled shapes to draw", ErrUnsupportedSVG)
	}
	return doc, nil
}

func attrMap(as []xml.Attr) map[string]string {
	m := make(map[string]string, len(as))
	for _, a := range as {
		m[a.Name.Local] = strings.TrimSpace(a.Value)
	}
	// Inline style declarations win over presentation attributes.
	for _, decl := range strings.Split(m["style"], ";") {
		k, v, ok := strings.Cut(decl, ":")
		if ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

func parseRoot(attrs map[string]string) (*svgDoc, error) {
	d := &svgDoc{}
	w, wok := parseLength(attrs["width"])
	h, hok := parseLength(attrs["height"])
	if vb := attrs["viewBox"]; vb != "" {
		nums, err := parseNumbers(vb)
		if err != nil || len(nums) != 4 || nums[2] <= 0 || nums[3] <= 0 {
			return nil, fmt.Errorf("%w: invalid viewBox %q", ErrUnsupportedSVG, vb)
		}
		copy(d.viewBox[:], nums)
		switch {
		case !wok && !hok:
			w, h = nums[2], nums[3]
		case !wok:
			w = h * nums[2] / nums[3]
		case !hok:
			h = w * nums[3] / nums[2]
		}
	} else {
		if !wok || !hok {
			return nil, fmt.Errorf("%w: the <svg> element needs a viewBox or both width and height", ErrUnsupportedSVG)
		}
		d.viewBox = [4]float64{0, 0, w, h}
	}
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("%w: the SVG has an empty size", ErrUnsupportedSVG)
	}
	d.width, d.height = w, h
	return d, nil
}

// parseLength reads a length in px (unitless or with a unit convertible to
// px). Percentages are not an intrinsic size.
func parseLength(s string) (float64, bool) {
	if s == "" || strings.HasSuffix(s, "%") {
		return 0, false
	}
	units := map[string]float64{"px": 1, "pt": 4.0 / 3, "pc": 16, "mm": 96 / 25.4, "cm": 96 / 2.54, "in": 96}
	f := 1.0
	for u, k := range units {
		if strings.HasSuffix(s, u) {
			s, f = strings.TrimSuffix(s, u), k
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, false
	}
	return v * f, true
}

func attrNum(s string, def float64) float64 {
	if v, ok := parseLength(s); ok {
		return v
	}
	return def
}

func childStyle(parent style, attrs map[string]string) (style, error) {
	st := parent
	if f, ok := attrs["fill"]; ok && f != "inherit" {
		st.fill = f
	}
	for _, k := range []string{"opacity", "fill-opacity"} {
		if v, ok := attrs[k]; ok {
			o, err := strconv.ParseFloat(v, 64)
			if err == nil {
				st.opacity *= math.Max(0, math.Min(1, o))
			}
		}
	}
	if tr := attrs["transform"]; tr != "" {
		m, err := parseTransform(tr)
		if err != nil {
			return style{}, err
		}
		st.xf = parent.xf.mul(m)
	}
	return st, nil
}

func (d *svgDoc) add(cmds []pathCmd, st style) error {
	if len(cmds) == 0 || st.fill == "none" || st.fill == "transparent" {
		return nil
	}
	c, err := parseColor(st.fill)
	if err != nil {
		return err
	}
	c.A = uint8(math.Round(float64(c.A) * st.opacity))
	d.shapes = append(d.shapes, shape{cmds: cmds, xf: st.xf, color: c})
	return nil
}

// parseTransform reads a transform list: matrix, translate, scale, rotate,
// skewX, skewY.
func parseTransform(s string) (affine, error) {
	m := identity
	rest := strings.TrimSpace(s)
	for rest != "" {
		open := strings.IndexByte(rest, '(')
		closeIdx := strings.IndexByte(rest, ')')
		if open < 0 || closeIdx < open {
			return m, fmt.Errorf("%w: invalid transform %q", ErrUnsupportedSVG, s)
		}
		name := strings.TrimSpace(rest[:open])
		args, err := parseNumbers(rest[open+1 : closeIdx])
		if err != nil {
			return m, fmt.Errorf("%w: invalid transform %q", ErrUnsupportedSVG, s)
		}
		rest = strings.TrimLeft(rest[closeIdx+1:], " ,\t\n\r")
		var t affine
		bad := false
		switch name {
		case "matrix":
			bad = len(args) != 6
			if !bad {
				copy(t[:], args)
			}
		case "translate":
			bad = len(args) < 1 || len(args) > 2
			if !bad {
				t = affine{1, 0, 0, 1, args[0], 0}
				if len(args) == 2 {
					t[5] = args[1]
				}
			}
		case "scale":
			bad = len(args) < 1 || len(args) > 2
			if !bad {
				sy := args[0]
				if len(args) == 2 {
					sy = args[1]
				}
				t = affine{args[0], 0, 0, sy, 0, 0}
			}
		case "rotate":
			bad = len(args) != 1 && len(args) != 3
			if !bad {
				a := args[0] * math.Pi / 180
				t = affine{math.Cos(a), math.Sin(a), -math.Sin(a), math.Cos(a), 0, 0}
				if len(args) == 3 {
					cx, cy := args[1], args[2]
					t = affine{1, 0, 0, 1, cx, cy}.mul(t).mul(affine{1, 0, 0, 1, -cx, -cy})
				}
			}
		case "skewX":
			bad = len(args) != 1
			if !bad {
				t = affine{1, 0, math.Tan(args[0] * math.Pi / 180), 1, 0, 0}
			}
		case "skewY":
			bad = len(args) != 1
			if !bad {
				t = affine{1, math.Tan(args[0] * math.Pi / 180), 0, 1, 0, 0}
			}
		default:
			bad = true
		}
		if bad {
			return m, fmt.Errorf("%w: invalid transform %q", ErrUnsupportedSVG, s)
		}
		m = m.mul(t)
	}
	return m, nil
}

// parseNumbers reads a list of numbers separated by spaces and/or commas.
func parseNumbers(s string) ([]float64, error) {
	sc := numScanner{s: s}
	var out []float64
	for {
		sc.skipSep()
		if sc.done() {
			return out, nil
		}
		v, err := sc.number()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

type numScanner struct {
	s string
	i int
}

func (sc *numScanner) done() bool { return sc.i >= len(sc.s) }

func (sc *numScanner) skipSep() {
	for sc.i < len(sc.s) && strings.IndexByte(" \t\r\n,", sc.s[sc.i]) >= 0 {
		sc.i++
	}
}

// number scans one SVG number, which may run into the next one without a
// separator ("1.5.5" is 1.5 and .5, "1-2" is 1 and -2).
func (sc *numScanner) number() (float64, error) {
	start := sc.i
	i := sc.i
	if i < len(sc.s) && (sc.s[i] == '+' || sc.s[i] == '-') {
		i++
	}
	digits, dot := 0, false
	for i < len(sc.s) {
		c := sc.s[i]
		if c >= '0' && c <= '9' {
			digits++
		} else if c == '.' && !dot {
			dot = true
		} else {
			break
		}
		i++
	}
	if digits == 0 {
		return 0, fmt.Errorf("%w: expected a number at %q", ErrUnsupportedSVG, clip(sc.s[start:]))
	}
	if i < len(sc.s) && (sc.s[i] == 'e' || sc.s[i] == 'E') {
		j := i + 1
		if j < len(sc.s) && (sc.s[j] == '+' || sc.s[j] == '-') {
			j++
		}
		if j < len(sc.s) && sc.s[j] >= '0' && sc.s[j] <= '9' {
			for j < len(sc.s) && sc.s[j] >= '0' && sc.s[j] <= '9' {
				j++
			}
			i = j
		}
	}
	v, err := strconv.ParseFloat(sc.s[start:i], 64)
	if err != nil {
		return 0, fmt.Errorf("%w: bad number %q", ErrUnsupportedSVG, sc.s[start:i])
	}
	sc.i = i
	return v, nil
}

func clip(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}

// parsePathData turns SVG path data into absolute M/L/Q/C/Z commands.
// Supported: M m L l H h V v Q q T t C c S s A a Z z.
func parsePathData(d string) ([]pathCmd, error) {
	sc := numScanner{s: d}
	var out []pathCmd
	var cur, start, lastCtrl [2]float64
	var cmd, prevCmd byte
	nums := func(n int) ([]float64, error) {
		v := make([]float64, n)
		for k := range v {
			sc.skipSep()
			x, err := sc.number()
			if err != nil {
				return nil, err
			}
			v[k] = x
		}
		return v, nil
	}
	for {
		sc.skipSep()
		if sc.done() {
			break
		}
		c := sc.s[sc.i]
		if isCmdLetter(c) {
			cmd = c
			sc.i++
		} else if cmd == 0 {
			return nil, fmt.Errorf("%w: path data must start with a command, got %q", ErrUnsupportedSVG, clip(d))
		} else if cmd == 'Z' || cmd == 'z' {
			return nil, fmt.Errorf("%w: numbers after Z in path data", ErrUnsupportedSVG)
		}
		rel := cmd >= 'a'
		base := [2]float64{}
		if rel {
			base = cur
		}
		up := cmd &^ 0x20 // upper case
		switch up {
		case 'Z':
			out = append(out, pathCmd{op: 'Z'})
			cur = start
		case 'M', 'L':
			v, err := nums(2)
			if err != nil {
				return nil, err
			}
			p := [2]float64{base[0] + v[0], base[1] + v[1]}
			op := up
			if up == 'M' {
				start = p
				// Coordinates after the first pair of a moveto are implicit linetos.
				if rel {
					cmd = 'l'
				} else {
					cmd = 'L'
				}
			}
			out = append(out, pathCmd{op: op, pts: [3][2]float64{p}})
			cur = p
		case 'H':
			v, err := nums(1)
			if err != nil {
				return nil, err
			}
			cur = [2]float64{base[0] + v[0], cur[1]}
			out = append(out, pathCmd{op: 'L', pts: [3][2]float64{cur}})
		case 'V':
			v, err := nums(1)
			if err != nil {
				return nil, err
			}
			y := v[0]
			if rel {
				y += base[1]
			}
			cur = [2]float64{cur[0], y}
			out = append(out, pathCmd{op: 'L', pts: [3][2]float64{cur}})
		case 'Q', 'T':
			var ctrl, end [2]float64
			if up == 'Q' {
				v, err := nums(4)
				if err != nil {
					return nil, err
				}
				ctrl = [2]float64{base[0] + v[0], base[1] + v[1]}
				end = [2]float64{base[0] + v[2], base[1] + v[3]}
			} else {
				v, err := nums(2)
				if err != nil {
					return nil, err
				}
				ctrl = cur
				if p := prevCmd &^ 0x20; p == 'Q' || p == 'T' {
					ctrl = [2]float64{2*cur[0] - lastCtrl[0], 2*cur[1] - lastCtrl[1]}
				}
				end = [2]float64{base[0] + v[0], base[1] + v[1]}
			}
			out = append(out, pathCmd{op: 'Q', pts: [3][2]float64{ctrl, end}})
			lastCtrl, cur = ctrl, end
		case 'C', 'S':
			var c1, c2, end [2]float64
			if up == 'C' {
				v, err := nums(6)
				if err != nil {
					return nil, err
				}
				c1 = [2]float64{base[0] + v[0], base[1] + v[1]}
				c2 = [2]float64{base[0] + v[2], base[1] + v[3]}
				end = [2]float64{base[0] + v[4], base[1] + v[5]}
			} else {
				v, err := nums(4)
				if err != nil {
					return nil, err
				}
				c1 = cur
				if p := prevCmd &^ 0x20; p == 'C' || p == 'S' {
					c1 = [2]float64{2*cur[0] - lastCtrl[0], 2*cur[1] - lastCtrl[1]}
				}
				c2 = [2]float64{base[0] + v[0], base[1] + v[1]}
				end = [2]float64{base[0] + v[2], base[1] + v[3]}
			}
			out = append(out, pathCmd{op: 'C', pts: [3][2]float64{c1, c2, end}})
			lastCtrl, cur = c2, end
		case 'A':
			v, err := nums(7)
			if err != nil {
				return nil, err
			}
			end := [2]float64{base[0] + v[5], base[1] + v[6]}
			out = append(out, arcToCubics(cur, v[0], v[1], v[2], v[3] != 0, v[4] != 0, end)...)
			cur = end
		default:
			return nil, fmt.Errorf("%w: unknown path command %q", ErrUnsupportedSVG, cmd)
		}
		prevCmd = cmd
	}
	return out, nil
}

func isCmdLetter(c byte) bool {
	return strings.IndexByte("MmLlHhVvQqTtCcSsAaZz", c) >= 0
}

// arcToCubics converts an elliptical arc (SVG implementation notes, F.6)
// into cubic Béziers of at most 90° each.
func arcToCubics(p0 [2]float64, rx, ry, phiDeg float64, large, sweep bool, p1 [2]float64) []pathCmd {
	if p0 == p1 {
		return nil
	}
	rx, ry = math.Abs(rx), math.Abs(ry)
	if rx == 0 || ry == 0 {
		return []pathCmd{{op: 'L', pts: [3][2]float64{p1}}}
	}
	phi := phiDeg * math.Pi / 180
	cosP, sinP := math.Cos(phi), math.Sin(phi)
	dx, dy := (p0[0]-p1[0])/2, (p0[1]-p1[1])/2
	x1 := cosP*dx + sinP*dy
	y1 := -sinP*dx + cosP*dy
	lambda := x1*x1/(rx*rx) + y1*y1/(ry*ry)
	if lambda > 1 {
		s := math.Sqrt(lambda)
		rx, ry = rx*s, ry*s
	}
	num := rx*rx*ry*ry - rx*rx*y1*y1 - ry*ry*x1*x1
	den := rx*rx*y1*y1 + ry*ry*x1*x1
	co := math.Sqrt(math.Max(0, num/den))
	if large == sweep {
		co = -co
	}
	cxp, cyp := co*rx*y1/ry, -co*ry*x1/rx
	cx := cosP*cxp - sinP*cyp + (p0[0]+p1[0])/2
	cy := sinP*cxp + cosP*cyp + (p0[1]+p1[1])/2
	ang := func(ux, uy, vx, vy float64) float64 {
		return math.Atan2(ux*vy-uy*vx, ux*vx+uy*vy)
	}
	t1 := ang(1, 0, (x1-cxp)/rx, (y1-cyp)/ry)
	dt := ang((x1-cxp)/rx, (y1-cyp)/ry, (-x1-cxp)/rx, (-y1-cyp)/ry)
	if !sweep && dt > 0 {
		dt -= 2 * math.Pi
	} else if sweep && dt < 0 {
		dt += 2 * math.Pi
	}
	n := int(math.Ceil(math.Abs(dt) / (math.Pi / 2)))
	step := dt / float64(n)
	k := 4.0 / 3 * math.Tan(step/4)
	pt := func(t float64) (x, y, ex, ey float64) {
		ct, st := math.Cos(t), math.Sin(t)
		x = cx + rx*ct*cosP - ry*st*sinP
		y = cy + rx*ct*sinP + ry*st*cosP
		ex = -rx*st*cosP - ry*ct*sinP
		ey = -rx*st*sinP + ry*ct*cosP
		return
	}
	var out []pathCmd
	t := t1
	for i := 0; i < n; i++ {
		ax, ay, adx, ady := pt(t)
		bx, by, bdx, bdy := pt(t + step)
		end := [2]float64{bx, by}
		if i == n-1 {
			end = p1
		}
		out = append(out, pathCmd{op: 'C', pts: [3][2]float64{
			{ax + k*adx, ay + k*ady}, {bx - k*bdx, by - k*bdy}, end,
		}})
		t += step
	}
	return out
}

func rectPath(attrs map[string]string) []pathCmd {
	x, y := attrNum(attrs["x"], 0), attrNum(attrs["y"], 0)
	w, h := attrNum(attrs["width"], 0), attrNum(attrs["height"], 0)
	if w <= 0 || h <= 0 {
		return nil
	}
	return []pathCmd{
		{op: 'M', pts: [3][2]float64{{x, y}}},
		{op: 'L', pts: [3][2]float64{{x + w, y}}},
		{op: 'L', pts: [3][2]float64{{x + w, y + h}}},
		{op: 'L', pts: [3][2]float64{{x, y + h}}},
		{op: 'Z'},
	}
}

// ellipsePath draws an ellipse as four cubic Béziers.
func ellipsePath(cx, cy, rx, ry float64) []pathCmd {
	if rx <= 0 || ry <= 0 {
		return nil
	}
	const k = 0.5522847498
	return []pathCmd{
		{op: 'M', pts: [3][2]float64{{cx + rx, cy}}},
		{op: 'C', pts: [3][2]float64{{cx + rx, cy + k*ry}, {cx + k*rx, cy + ry}, {cx, cy + ry}}},
		{op: 'C', pts: [3][2]float64{{cx - k*rx, cy + ry}, {cx - rx, cy + k*ry}, {cx - rx, cy}}},
		{op: 'C', pts: [3][2]float64{{cx - rx, cy - k*ry}, {cx - k*rx, cy - ry}, {cx, cy - ry}}},
		{op: 'C', pts: [3][2]float64{{cx + k*rx, cy - ry}, {cx + rx, cy - k*ry}, {cx + rx, cy}}},
		{op: 'Z'},
	}
}

func polygonPath(points string) ([]pathCmd, error) {
	v, err := parseNumbers(points)
	if err != nil || len(v)%2 != 0 {
		return nil, fmt.Errorf("%w: invalid polygon points", ErrUnsupportedSVG)
	}
	var out []pathCmd
	for i := 0; i+1 < len(v); i += 2 {
		op := byte('L')
		if i == 0 {
			op = 'M'
		}
		out = append(out, pathCmd{op: op, pts: [3][2]float64{{v[i], v[i+1]}}})
	}
	if len(out) > 0 {
		out = append(out, pathCmd{op: 'Z'})
	}
	return out, nil
}

// rasterize draws doc into an image width pixels wide (0 means the
// intrinsic width); the height keeps the aspect ratio. Shapes are filled
// with the nonzero rule and composited in document order.
func rasterize(doc *svgDoc, width int) (*image.RGBA, error) {
	if width <= 0 {
		width = int(math.Round(doc.width))
	}
	height := int(math.Round(float64(width) * doc.height / doc.width))
	if width < 1 || height < 1 || width > maxRasterSide || height > maxRasterSide {
		return nil, fmt.Errorf("%w: output size %dx%d is outside 1..%d pixels per side", ErrUnsupportedSVG, width, height, maxRasterSide)
	}
	// viewBox → pixels, preserveAspectRatio="xMidYMid meet".
	vb := doc.viewBox
	s := math.Min(float64(width)/vb[2], float64(height)/vb[3])
	tx := (float64(width)-vb[2]*s)/2 - vb[0]*s
	ty := (float64(height)-vb[3]*s)/2 - vb[1]*s
	view := affine{s, 0, 0, s, tx, ty}

	dst := image.NewRGBA(image.Rect(0, 0, width, height))
	z := vector.NewRasterizer(width, height)
	for _, sh := range doc.shapes {
		z.Reset(width, height)
		m := view.mul(sh.xf)
		open := false
		for _, c := range sh.cmds {
			switch c.op {
			case 'M':
				if open {
					z.ClosePath()
				}
				z.MoveTo(m.apply(c.pts[0][0], c.pts[0][1]))
				open = true
			case 'L':
				z.LineTo(m.apply(c.pts[0][0], c.pts[0][1]))
			case 'Q':
				bx, by := m.apply(c.pts[0][0], c.pts[0][1])
				cx, cy := m.apply(c.pts[1][0], c.pts[1][1])
				z.QuadTo(bx, by, cx, cy)
			case 'C':
				bx, by := m.apply(c.pts[0][0], c.pts[0][1])
				cx, cy := m.apply(c.pts[1][0], c.pts[1][1])
				dx, dy := m.apply(c.pts[2][0], c.pts[2][1])
				z.CubeTo(bx, by, cx, cy, dx, dy)
			case 'Z':
				if open {
					z.ClosePath()
					open = false
				}
			}
		}
		if open {
			z.ClosePath()
		}
		z.Draw(dst, dst.Bounds(), image.NewUniform(sh.color), image.Point{})
	}
	return dst, nil
}

var _ draw.Image = (*image.RGBA)(nil)
