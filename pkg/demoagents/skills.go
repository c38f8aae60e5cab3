package demoagents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image/png"
	"math"
	"path"
	"regexp"
	"strings"

	"github.com/clientagent/clientagent/pkg/catalog"
)

// skills builds the four demo skills.
func skills(opts Options) []*skill {
	list := []*skill{svgSkill(), pngSkill(), flangeSkill(), publishSkill(opts.Publications)}
	for _, s := range list {
		s.schema = compileSchema(s.id, s.ext.InputSchema)
	}
	return list
}

// ---- create_svg_artifact --------------------------------------------------

var colorPattern = regexp.MustCompile(`^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)

func colorNames() []string {
	return []string{"black", "white", "red", "green", "blue", "yellow", "orange", "purple", "magenta", "cyan", "gray", "grey", "silver", "navy", "teal", "maroon", "olive", "lime", "brown", "pink", "gold", "indigo"}
}

func svgSkill() *skill {
	return &skill{
		path:             PathSVG,
		agentName:        "SVG Text Artist",
		agentDescription: "Draws words as scalable vector graphics.",
		id:               "create_svg_artifact",
		name:             "Create SVG with a word",
		description: "Creates an SVG image (image/svg+xml) showing one word or short phrase, with the letters drawn as vector outlines " +
			"(no fonts needed to view it). Input: the word, optional font size and colour. Output: one artifact '<word>.svg'. " +
			"This is the first step for any image of text: for a PNG, pass the produced artifact_id to convert_svg_to_png; " +
			"to publish it, pass it to publish_artifact.",
		tags:        []string{"svg", "image", "text", "vector"},
		examples:    []string{"Create an SVG with the word Popelnase", "Make a red SVG logo that says Hello"},
		outputModes: []string{"image/svg+xml"},
		ext: catalog.SkillExtension{
			InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "word": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The word or short phrase to draw, exactly as it should appear."},
    "font_size": {"type": "number", "minimum": 8, "maximum": 400, "description": "Letter height in pixels (em size). Default 96."},
    "color": {"type": "string", "description": "Text colour: a hex value like #1f6feb or a basic colour name (black, red, blue, navy, ...). Default #111827."}
  },
  "required": ["word"],
  "additionalProperties": false
}`),
			UsageNotes: "Produces an SVG artifact; chain convert_svg_to_png with its artifact_id when the user wants a PNG/bitmap.",
		},
		run: runSVG,
	}
}

func runSVG(_ context.Context, in *callInput) (*callOutput, error) {
	word := strings.TrimSpace(argString(in.args, "word"))
	if word == "" {
		return nil, userErrorf("word must not be empty")
	}
	size, ok := argNumber(in.args, "font_size")
	if !ok {
		size = 96
	}
	col := argString(in.args, "color")
	if col == "" {
		col = "#111827"
	}
	col = strings.ToLower(col)
	if _, named := namedColors[col]; !named && !colorPattern.MatchString(col) {
		return nil, userErrorf("color %q is not supported: use a hex value like #1f6feb or one of %s", col, strings.Join(colorNames(), ", "))
	}
	svg, err := wordSVG(word, size, col)
	if err != nil {
		return nil, err
	}
	name := fileStem(word) + ".svg"
	return &callOutput{
		summary: fmt.Sprintf("Created %s: the word %q drawn as vector paths (%s, %gpx).", name, word, col, size),
		files:   []outputFile{{name: name, mimeType: "image/svg+xml", description: fmt.Sprintf("SVG image of the word %q", word), data: svg}},
		data:    map[string]any{"word": word, "font_size": size, "color": col, "format": "svg"},
	}, nil
}

// wordSVG lays out word in Go Bold and writes it as one filled path on a
// white background with a margin of a quarter em.
func wordSVG(word string, size float64, col string) ([]byte, error) {
	t, err := layoutText(faceBold, word, size)
	if err != nil {
		return nil, fmt.Errorf("lay out %q: %w", word, err)
	}
	margin := size / 4
	w := math.Ceil(t.advance + 2*margin)
	h := math.Ceil(t.ascent + t.descent + 2*margin)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s">`+"\n", num(w), num(h), num(w), num(h))
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(word))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`+"\n", num(w), num(h))
	fmt.Fprintf(&b, `<path fill="%s" d="%s"/>`+"\n", col, t.pathData(margin, margin+t.ascent))
	b.WriteString("</svg>\n")
	return b.Bytes(), nil
}

// fileStem makes a safe file name stem from free text.
func fileStem(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ' || r == '.':
			b.WriteByte('_')
		default:
			if r > 127 {
				b.WriteRune(r)
			}
		}
	}
	out := strings.Trim(b.String(), "_")
	if out == "" {
		return "image"
	}
	if len(out) > 60 {
		out = out[:60]
	}
	return out
}

// ---- convert_svg_to_png ---------------------------------------------------

func pngSkill() *skill {
	return &skill{
		path:             PathPNG,
		agentName:        "SVG Rasterizer",
		agentDescription: "Converts SVG images to PNG bitmaps.",
		id:               "convert_svg_to_png",
		name:             "Convert SVG to PNG",
		description: "Converts an existing SVG artifact into a PNG bitmap (image/png). Input: artifact_id of an SVG artifact " +
			"(for example the output of create_svg_artifact or design_valve_flange), optional width in pixels (height keeps the aspect ratio). " +
			"Output: one artifact '<name>.png'. Use it whenever the user asks for a PNG, bitmap or raster image of something that is or can be made as SVG.",
		tags:        []string{"png", "svg", "convert", "raster"},
		examples:    []string{"Convert the SVG to PNG", "Create a PNG image with the word Popelnase"},
		outputModes: []string{"image/png"},
		ext: catalog.SkillExtension{
			InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "artifact_id": {"type": "string", "x_artifact_ref": true, "description": "The SVG artifact to convert."},
    "width": {"type": "integer", "minimum": 16, "maximum": 4096, "description": "Output width in pixels. Default: the SVG's own width."}
  },
  "required": ["artifact_id"],
  "additionalProperties": false
}`),
			UsageNotes: "Needs an SVG artifact id; if there is none yet, create the SVG first (create_svg_artifact).",
		},
		run: runPNG,
	}
}

func runPNG(ctx context.Context, in *callInput) (*callOutput, error) {
	id := argString(in.args, "artifact_id")
	f, err := in.fetch(ctx, id)
	if err != nil {
		return nil, err
	}
	if f.mimeType != "" && !strings.HasPrefix(f.mimeType, "image/svg") && !strings.Contains(string(f.data[:min(len(f.data), 512)]), "<svg") {
		return nil, userErrorf("artifact %s is %s, not an SVG image", id, f.mimeType)
	}
	doc, err := parseSVG(f.data)
	if err != nil {
		return nil, userErrorf("cannot convert artifact %s: %v", id, err)
	}
	width := 0
	if w, ok := argNumber(in.args, "width"); ok {
		width = int(w)
	}
	img, err := rasterize(doc, width)
	if err != nil {
		return nil, userErrorf("cannot convert artifact %s: %v", id, err)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, fmt.Errorf("encode png: %w", err)
	}
	stem := strings.TrimSuffix(f.name, path.Ext(f.name))
	if stem == "" {
		stem = "image"
	}
	name := fileStem(stem) + ".png"
	sz := img.Bounds().Size()
	return &callOutput{
		summary: fmt.Sprintf("Converted %s to %s (%dx%d pixels).", nonEmpty(f.name, id), name, sz.X, sz.Y),
		files:   []outputFile{{name: name, mimeType: "image/png", description: fmt.Sprintf("PNG rendering of %s, %dx%d", nonEmpty(f.name, id), sz.X, sz.Y), data: b.Bytes()}},
		data:    map[string]any{"source_artifact_id": id, "width": sz.X, "height": sz.Y, "format": "png"},
	}, nil
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
