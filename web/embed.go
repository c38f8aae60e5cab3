// Package web holds the static chat page (plain HTML, CSS and ES modules,
// no build step) and serves it. It must not talk to the API itself or
// load anything from outside the embedded files: the page calls the API
// from the browser, on the same origin or on config.js's apiBase. vendor/
// holds the browser builds of marked and DOMPurify, copied unchanged from
// node_modules with their licences (web/README.md).
package web

import (
	"embed"
	"net/http"
)

//go:embed index.html app.js api.js config.js style.css vendor
var files embed.FS

// PageCSP is the page's Content-Security-Policy: index.html carries it
// as a meta element (so a static host serves it too), and Handler sends it
// as a header with frame-ancestors, which only a header can carry. No
// inline script or style, nothing loaded from elsewhere; connect-src
// admits the API and the event delivery on other origins.
const PageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self' https: wss: ws://127.0.0.1:* ws://localhost:* http://127.0.0.1:* http://localhost:*; base-uri 'none'; form-action 'none'; object-src 'none'"

// Handler serves the page: index.html at "/", the other files by name with
// their content types, and "Cache-Control: no-cache" on every answer so a
// redeployed page is picked up at once (the files are small).
func Handler() http.Handler {
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", PageCSP+"; frame-ancestors 'none'")
		fileServer.ServeHTTP(w, r)
	})
}
