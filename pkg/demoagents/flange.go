package demoagents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/clientagent/clientagent/pkg/catalog"
)

func flangeSkill() *skill {
	return &skill{
		path:             PathFlange,
		agentName:        "Valve Flange Designer",
		agentDescription: "Designs parametric valve flanges and returns dimensioned drawings.",
		id:               "design_valve_flange",
		name:             "Design a valve flange",
		description: "Designs a circular valve flange and returns its drawing as an SVG artifact (image/svg+xml): outer diameter, " +
			"centre bore and bolt holes on a bolt circle, with a title stating material and dimensions. Inputs: number of bolt holes (3-24), " +
			"outer diameter in mm, material (the user must choose it), optional bolt circle and bore diameters. Output: one artifact " +
			"'flange_<holes>x<diameter>_<material>.svg'. If the geometry does not fit, the designer asks which dimension to change. " +
			"The drawing can be chained into convert_svg_to_png for a PNG, or publish_artifact.",
		tags:        []string{"cad", "flange", "valve", "drawing", "svg"},
		examples:    []string{"Design a steel valve flange with 8 holes and 200 mm outer diameter"},
		outputModes: []string{"image/svg+xml"},
		ext: catalog.SkillExtension{
			InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "holes": {"type": "integer", "minimum": 3, "maximum": 24, "description": "Number of bolt holes."},
    "outer_diameter_mm": {"type": "number", "minimum": 20, "maximum": 5000, "description": "Outer diameter of the flange in millimetres."},
    "material": {"type": "string", "enum": ["steel", "stainless", "brass", "pvc"], "description": "Flange material."},
    "bolt_circle_mm": {"type": "number", "exclusiveMinimum": 0, "description": "Diameter of the circle through the bolt hole centres, mm. Default 75% of the outer diameter."},
    "bore_mm": {"type": "number", "exclusiveMinimum": 0, "description": "Diameter of the centre bore, mm. Default 40% of the outer diameter."}
  },
  "required": ["holes", "outer_diameter_mm", "material"],
  "additionalProperties": false
}`),
			UserInput:  []string{"material"},
			UsageNotes: "Material is chosen by the user; never guess it. Dimensions may come from the user's request.",
		},
		run: runFlange,
	}
}

// flangeParams are the design inputs after defaults.
type flangeParams struct {
	holes              int
	od, bc, bore, hole float64
	bcGiven, boreGiven bool
	material           string
}

// holeDiameter is the bolt hole size for an outer diameter: roughly what
// standard flanges use, rounded to 0.5 mm.
func holeDiameter(od float64) float64 {
	return math.Round((0.06*od+6)*2) / 2
}

func newFlangeParams(args map[string]any) flangeParams {
	p := flangeParams{material: argString(args, "material")}
	h, _ := argNumber(args, "holes")
	p.holes = int(h)
	p.od, _ = argNumber(args, "outer_diameter_mm")
	p.bc, p.bcGiven = argNumber(args, "bolt_circle_mm")
	p.bore, p.boreGiven = argNumber(args, "bore_mm")
	p.fill()
	return p
}

func (p *flangeParams) fill() {
	if !p.bcGiven {
		p.bc = math.Round(0.75 * p.od)
	}
	if !p.boreGiven {
		p.bore = math.Round(0.4 * p.od)
	}
	p.hole = holeDiameter(p.od)
}

// holesFit is the circumference rule: each hole needs 1.5 hole diameters
// of bolt circle.
func (p flangeParams) holesFit() bool {
	return p.hole*1.5*float64(p.holes) <= math.Pi*p.bc
}

// check returns nil when the flange can be built, else what to change.
func (p flangeParams) check() *inputRequest {
	switch {
	case p.bc+p.hole > p.od:
		maxBC := math.Floor(p.od - p.hole)
		return &inputRequest{
			message: fmt.Sprintf("The bolt circle (Ø%s mm) with Ø%s mm holes does not fit inside the Ø%s mm flange. Use a bolt circle of at most %s mm, or a larger outer diameter.",
				num(p.bc), num(p.hole), num(p.od), num(maxBC)),
			fields: []catalog.FormField{
				{Name: "bolt_circle_mm", Type: "number", Required: true, Description: fmt.Sprintf("Bolt circle diameter in mm, at most %s for a Ø%s mm flange.", num(maxBC), num(p.od))},
				{Name: "outer_diameter_mm", Type: "number", Description: fmt.Sprintf("Or a larger outer diameter in mm (currently %s).", num(p.od))},
			},
		}
	case p.bore > p.bc-p.hole:
		maxBore := math.Floor(p.bc - p.hole - 1)
		return &inputRequest{
			message: fmt.Sprintf("The bore (Ø%s mm) would cut into the bolt holes on the Ø%s mm bolt circle. Use a bore of at most %s mm.", num(p.bore), num(p.bc), num(maxBore)),
			fields: []catalog.FormField{
				{Name: "bore_mm", Type: "number", Required: true, Description: fmt.Sprintf("Centre bore diameter in mm, at most %s.", num(maxBore))},
			},
		}
	case !p.holesFit():
		maxHoles := int(math.Floor(math.Pi * p.bc / (1.5 * p.hole)))
		need := p.hole * 1.5 * float64(p.holes)
		msg := fmt.Sprintf("%d holes of Ø%s mm need %s mm of bolt circle circumference, but the Ø%s mm bolt circle has only %s mm. ",
			p.holes, num(p.hole), num(math.Ceil(need)), num(p.bc), num(math.Floor(math.Pi*p.bc)))
		var first catalog.FormField
		if p.bcGiven {
			minBC := math.Ceil(need / math.Pi)
			msg += fmt.Sprintf("Use a bolt circle of at least %s mm (with a matching outer diameter), or at most %d holes.", num(minBC), maxHoles)
			first = catalog.FormField{Name: "bolt_circle_mm", Type: "number", Required: true, Description: fmt.Sprintf("Bolt circle diameter in mm, at least %s.", num(minBC))}
		} else {
			minOD := p.minOuterDiameter()
			msg += fmt.Sprintf("Increase the outer diameter to at least %s mm, or use at most %d holes.", num(minOD), maxHoles)
			first = catalog.FormField{Name: "outer_diameter_mm", Type: "number", Required: true, Description: fmt.Sprintf("Outer diameter in mm, at least %s for %d holes.", num(minOD), p.holes)}
		}
		return &inputRequest{message: msg, fields: []catalog.FormField{
			first,
			{Name: "holes", Type: "integer", Description: fmt.Sprintf("Or fewer bolt holes: at most %d.", maxHoles)},
		}}
	}
	return nil
}

// minOuterDiameter finds the smallest whole-mm outer diameter for which
// the holes fit with default bolt circle and hole size.
func (p flangeParams) minOuterDiameter() float64 {
	for od := math.Ceil(p.od); od <= 5000; od++ {
		q := p
		q.od = od
		q.fill()
		if q.holesFit() && q.bc+q.hole <= q.od && q.bore <= q.bc-q.hole {
			return od
		}
	}
	return 5000
}

var materialColors = map[string]string{
	"steel":     "#6b7280",
	"stainless": "#a3adb8",
	"brass":     "#b5892e",
	"pvc":       "#7c8ea3",
}

func runFlange(_ context.Context, in *callInput) (*callOutput, error) {
	p := newFlangeParams(in.args)
	if ir := p.check(); ir != nil {
		return &callOutput{inputRequired: ir}, nil
	}
	svg, err := flangeSVG(p)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("flange_%dx%s_%s.svg", p.holes, num(p.od), p.material)
	desc := fmt.Sprintf("%s valve flange Ø%s mm, bore Ø%s mm, %d × Ø%s mm holes on Ø%s mm bolt circle", p.material, num(p.od), num(p.bore), p.holes, num(p.hole), num(p.bc))
	return &callOutput{
		summary: "Designed a " + desc + ". Drawing: " + name + ".",
		files:   []outputFile{{name: name, mimeType: "image/svg+xml", description: desc, data: svg}},
		data: map[string]any{
			"holes": p.holes, "outer_diameter_mm": p.od, "bolt_circle_mm": p.bc, "bore_mm": p.bore,
			"hole_diameter_mm": p.hole, "material": p.material,
		},
	}, nil
}

// flangeSVG draws the flange to scale in a 640×720 sheet: filled disc,
// bore and holes knocked out in white, the bolt circle as a thin dashed
// line, and a two-line title drawn as font outlines.
func flangeSVG(p flangeParams) ([]byte, error) {
	const W, H, cx, cy, R = 640.0, 720.0, 320.0, 300.0, 260.0
	s := R / (p.od / 2)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s">`+"\n", num(W), num(H), num(W), num(H))
	fmt.Fprintf(&b, "<title>Valve flange, %s, OD %s mm</title>\n", p.material, num(p.od))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`+"\n", num(W), num(H))
	fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%s" fill="%s"/>`+"\n", num(cx), num(cy), num(R), materialColors[p.material])
	fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%s" fill="none" stroke="#ffffff" stroke-width="1" stroke-dasharray="6 4"/>`+"\n", num(cx), num(cy), num(p.bc/2*s))
	fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%s" fill="#ffffff"/>`+"\n", num(cx), num(cy), num(p.bore/2*s))
	for i := 0; i < p.holes; i++ {
		a := 2*math.Pi*float64(i)/float64(p.holes) - math.Pi/2
		hx, hy := cx+math.Cos(a)*p.bc/2*s, cy+math.Sin(a)*p.bc/2*s
		fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%s" fill="#ffffff"/>`+"\n", num(hx), num(hy), num(p.hole/2*s))
	}
	lines := []struct {
		face typeface
		size float64
		y    float64
		text string
	}{
		{faceBold, 30, 628, fmt.Sprintf("Valve flange · %s", p.material)},
		{faceRegular, 19, 668, fmt.Sprintf("OD %s mm · bore Ø%s mm · %d × Ø%s mm on Ø%s mm", num(p.od), num(p.bore), p.holes, num(p.hole), num(p.bc))},
	}
	for _, l := range lines {
		t, err := layoutText(l.face, l.text, l.size)
		if err != nil {
			return nil, fmt.Errorf("lay out title: %w", err)
		}
		if t.advance > W-40 { // long numbers: shrink to fit the sheet
			if t, err = layoutText(l.face, l.text, l.size*(W-40)/t.advance); err != nil {
				return nil, fmt.Errorf("lay out title: %w", err)
			}
		}
		fmt.Fprintf(&b, `<path fill="#111827" d="%s"/>`+"\n", t.pathData(cx-t.advance/2, l.y))
	}
	b.WriteString("</svg>\n")
	return b.Bytes(), nil
}
