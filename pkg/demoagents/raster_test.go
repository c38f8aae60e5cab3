package demoagents

import (
	"errors"
	"image"
	"image/color"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePathData(t *testing.T) {
	t.Parallel()
	p := func(x, y float64) [3][2]float64 { return [3][2]float64{{x, y}} }
	tests := []struct {
		d    string
		want []pathCmd
	}{
		{"M1 2L3 4Z", []pathCmd{{op: 'M', pts: p(1, 2)}, {op: 'L', pts: p(3, 4)}, {op: 'Z'}}},
		// implicit lineto after moveto, relative commands, packed numbers
		{"m1,2 3,4h5v-1.5.5z", []pathCmd{{op: 'M', pts: p(1, 2)}, {op: 'L', pts: p(4, 6)}, {op: 'L', pts: p(9, 6)}, {op: 'L', pts: p(9, 4.5)}, {op: 'L', pts: p(9, 5)}, {op: 'Z'}}},
		{"M0 0H10V10h-5", []pathCmd{{op: 'M', pts: p(0, 0)}, {op: 'L', pts: p(10, 0)}, {op: 'L', pts: p(10, 10)}, {op: 'L', pts: p(5, 10)}}},
		{"M0 0Q5 5 10 0T20 0", []pathCmd{{op: 'M', pts: p(0, 0)}, {op: 'Q', pts: [3][2]float64{{5, 5}, {10, 0}}}, {op: 'Q', pts: [3][2]float64{{15, -5}, {20, 0}}}}},
		{"M0 0c1 1 2 2 3 3s4 4 5 5", []pathCmd{{op: 'M', pts: p(0, 0)}, {op: 'C', pts: [3][2]float64{{1, 1}, {2, 2}, {3, 3}}}, {op: 'C', pts: [3][2]float64{{4, 4}, {7, 7}, {8, 8}}}}},
		{"M1e1-2E0", []pathCmd{{op: 'M', pts: p(10, -2)}}},
	}
	for _, tt := range tests {
		got, err := parsePathData(tt.d)
		if err != nil {
			t.Errorf("parsePathData(%q) error = %v", tt.d, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(pathCmd{})); diff != "" {
			t.Errorf("parsePathData(%q) mismatch (-want +got):\n%s", tt.d, diff)
		}
	}
	for _, bad := range []string{"1 2", "M1", "M1 2 X3", "Mz1"} {
		if _, err := parsePathData(bad); !errors.Is(err, ErrUnsupportedSVG) {
			t.Errorf("parsePathData(%q) error = %v, want ErrUnsupportedSVG", bad, err)
		}
	}
}

func TestArcEndsAtTarget(t *testing.T) {
	t.Parallel()
	cmds, err := parsePathData("M10 0A10 10 0 0 1 -10 0")
	if err != nil {
		t.Fatalf("parsePathData(arc) error = %v", err)
	}
	last := cmds[len(cmds)-1]
	if len(cmds) != 3 || last.op != 'C' || last.pts[2] != [2]float64{-10, 0} {
		t.Fatalf("half-circle arc = %v, want 2 cubics ending at (-10,0)", cmds)
	}
	// The midpoint of a sweep-1 half circle from (10,0) to (-10,0) is (0,10).
	mid := cmds[1].pts[2]
	if math.Abs(mid[0]) > 1e-9 || math.Abs(mid[1]-10) > 1e-9 {
		t.Errorf("arc midpoint = %v, want (0,10)", mid)
	}
}

func TestRasterizeGroupsAndTransforms(t *testing.T) {
	t.Parallel()
	// 100x50 user units scaled to 200x100 pixels; a red square moved by a
	// group translate+scale, and a blue circle whose ring hole shows white
	// (nonzero fill of a path with an opposite-wound inner contour).
	svg := `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 50">
<rect width="100" height="50" fill="white"/>
<g transform="translate(10 10) scale(2)"><rect x="0" y="0" width="10" height="10" style="fill:#ff0000"/></g>
<path fill="rgb(0,0,255)" d="M70 5 h20 v20 h-20 z M75 10 v10 h10 v-10 z"/>
<defs><rect width="100" height="50" fill="black"/></defs>
<rect x="0" y="40" width="10" height="10" fill="none"/>
</svg>`
	doc, err := parseSVG([]byte(svg))
	if err != nil {
		t.Fatalf("parseSVG() error = %v", err)
	}
	img, err := rasterize(doc, 200)
	if err != nil {
		t.Fatalf("rasterize() error = %v", err)
	}
	if got := img.Bounds(); got != image.Rect(0, 0, 200, 100) {
		t.Fatalf("bounds = %v, want 200x100", got)
	}
	white := color.RGBA{255, 255, 255, 255}
	tests := []struct {
		name string
		x, y int
		want color.RGBA
	}{
		{"inside moved square", 40, 40, color.RGBA{255, 0, 0, 255}},
		{"left of moved square", 15, 40, white},
		{"below moved square", 40, 65, white},
		{"blue ring", 145, 15, color.RGBA{0, 0, 255, 255}},
		{"ring hole", 160, 30, white},
		{"defs not drawn", 5, 95, white},
	}
	for _, tt := range tests {
		if got := img.RGBAAt(tt.x, tt.y); got != tt.want {
			t.Errorf("%s: pixel(%d,%d) = %v, want %v", tt.name, tt.x, tt.y, got, tt.want)
		}
	}
}

func TestParseColor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want color.NRGBA
	}{
		{"#fff", color.NRGBA{255, 255, 255, 255}},
		{"#1F6FEB", color.NRGBA{0x1f, 0x6f, 0xeb, 255}},
		{"#11223380", color.NRGBA{0x11, 0x22, 0x33, 0x80}},
		{"navy", color.NRGBA{0, 0, 128, 255}},
		{"rgb(255, 0, 10)", color.NRGBA{255, 0, 10, 255}},
	}
	for _, tt := range tests {
		got, err := parseColor(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseColor(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"url(#g)", "#12", "chartreuse-ish"} {
		if _, err := parseColor(bad); !errors.Is(err, ErrUnsupportedSVG) {
			t.Errorf("parseColor(%q) error = %v, want ErrUnsupportedSVG", bad, err)
		}
	}
}
