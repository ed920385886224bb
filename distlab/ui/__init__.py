"What a person looks at: matplotlib figures and the JupyterLab widgets."
