"""The --html page: report.py is the page itself; tokens.py makes tokens visible and marks them, figures.py draws
the histogram every method has, style.py is the stylesheet, suite.py the benchmark's own page. A method's own
pictures of its rounds are its family's (workbench/methods/)."""
