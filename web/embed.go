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
		fileServer.ServeHTTP(w, r)
	})
}
