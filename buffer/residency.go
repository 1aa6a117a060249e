package buffer

// onDevice reports whether t's records are in device memory (false while
// Device.Close has moved them to the host).
func onDevice(t tables) bool {
	if t.half != nil {
		return t.half.OnDevice()
	}
	return t.table.OnDevice()
}
