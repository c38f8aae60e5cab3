package files

import "testing"

func TestCheckFileURL(t *testing.T) {
	t.Parallel()
	guarded := NewFetcher(Options{Origins: []string{"http://127.0.0.1:8080"}})
	private := NewFetcher(Options{AllowPrivate: true})
	tests := []struct {
		f   *Fetcher
		uri string
		ok  bool
	}{
		{guarded, "http://127.0.0.1:8080/f.png", true}, // the allowed origin
		{guarded, "http://127.0.0.1:9090/f.png", false},
		{guarded, "http://10.1.2.3/f.png", false},
		{guarded, "http://2130706433/f.png", false},
		{guarded, "https://bucket.s3.amazonaws.com/x?sig=1", true},
		{guarded, "http://169.254.169.254/latest/meta-data/", false},
		{guarded, "file:///etc/passwd", false},
		{private, "http://10.1.2.3/f.png", true},
		{private, "http://127.0.0.1:9090/f.png", true},
		{private, "http://169.254.169.254/latest/meta-data/", false},
		{private, "http://[fd00:ec2::254]/latest/", false},
		{private, "gopher://x", false},
	}
	for _, tt := range tests {
		if err := tt.f.CheckURL(tt.uri); (err == nil) != tt.ok {
			t.Errorf("CheckURL(%q) (private %v) = %v, want ok=%v", tt.uri, tt.f.anyAddr, err, tt.ok)
		}
	}
}
