"""Export a merged model for the tools people run small models with locally (llama.cpp,
Ollama, LM Studio): GGUF files from llama.cpp's own converter, verified against the source
folder, plus an Ollama ``Modelfile`` with the family's chat template and stop tokens."""
