// Package web will hold the profile page (HTML/CSS/JS embedded with
// go:embed) and its server for `ag serve`. Not built yet: its issue comes
// after core, profile and webgpu.
package web
