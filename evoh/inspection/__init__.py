"""Reading recorded episodes back: an index of a file's episodes, a turn's pieces, and a browsable HTML page."""
