package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is where the dashboard is served.
const Prefix = "/dashboard"

// Handler serves the dashboard's files under Prefix.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("dashboard: " + err.Error()) // the embedded tree is part of the binary
	}
	files := http.StripPrefix(Prefix+"/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == Prefix {
			// Relative, so that it also works behind a proxy that mounts
			// the node under a path of its own.
			w.Header().Set("Location", "dashboard/")
			w.WriteHeader(http.StatusFound)
			return
		}
		h := w.Header()
		// Everything the page loads is its own: no inline script, nothing
		// from another origin.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// Wrap serves the dashboard at /dashboard and /dashboard/..., and hands
// every other request to next.
func Wrap(next http.Handler) http.Handler {
	dash := Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Prefix || strings.HasPrefix(r.URL.Path, Prefix+"/") {
			dash.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
