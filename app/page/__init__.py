"""The pieces of the --html page (app/report.py is the page itself): tokens.py makes tokens visible and marks
them, figures.py draws the histogram, SpS's residual and the earlier beyond/ methods' pictures, block.py block
verification's, lookahead.py lookahead decoding's, heads.py Medusa's and EAGLE's; style.py is the stylesheet,
suite.py the benchmark's own page."""
