# Custom models (models/common/model_spec.h): a named model with fields
# replaced (NAME:key=value,... or --vocab-size / --layers), or a Hugging Face
# LLaMA config.json (config:PATH), trains and plans like a named one; a bad
# key, value, file or vocabulary fails naming it and what is valid.
if(TARGET sdp-train AND TARGET sdp-plan)
  file(WRITE ${SDP_CLI_WORK}/spec_llama_config.json
       "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, "
       "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, "
       "\"vocab_size\": 300, \"max_position_embeddings\": 64, \"rope_theta\": 10000.0, "
       "\"tie_word_embeddings\": true}\n")
  file(WRITE ${SDP_CLI_WORK}/spec_gpt2_config.json
       "{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 2, \"vocab_size\": 300}\n")
  set(_run --data synthetic:vocab=300 --steps 1 --batch 2 --seq 16 --progress false)

  # A custom LLaMA without vocab takes the data's.
  sdp_cli_case(model_spec_vocab_from_data PRINTS "sdp-train: tiny:layers=1,vocab=300 \\("
               ${SDP_TRAIN} --model tiny:layers=1 ${_run})
  sdp_cli_case(model_spec_flags PRINTS "sdp-train: tiny:layers=1,vocab=300 \\("
               ${SDP_TRAIN} --model tiny --vocab-size 300 --layers 1 ${_run})
  sdp_cli_case(model_spec_config_json PRINTS "sdp-train: custom \\(0.02M parameters\\)"
               ${SDP_TRAIN} --model config:${SDP_CLI_WORK}/spec_llama_config.json ${_run})
  sdp_cli_case(model_spec_resnet PRINTS "sdp-train: resnet-tiny:blocks=1-1-1-1 \\("
               ${SDP_TRAIN} --model resnet-tiny:blocks=1-1-1-1
               --data synthetic-images:height=8,width=8,classes=5 --steps 1 --batch 2
               --progress false)
  sdp_cli_case(model_spec_plan PRINTS "sdp-plan: mini:layers=8,vocab=1024 \\(1.1M parameters\\)"
               ${SDP_PLAN} --model mini --layers 8 --vocab-size 1024 --world 2 --strategies ddp)

  sdp_cli_case(model_spec_unknown_key FAILS
               "model 'mini:layer=8': unknown key 'layer' (valid: vocab, layers, dim, heads"
               ${SDP_TRAIN} --model mini:layer=8 --steps 1)
  sdp_cli_case(model_spec_bad_value FAILS
               "model override heads=four is invalid (valid: an integer in [1, 16777216])"
               ${SDP_TRAIN} --model mini:heads=four --steps 1)
  sdp_cli_case(model_spec_not_key_value FAILS "'layers' is not key=value"
               ${SDP_TRAIN} --model mini:layers --steps 1)
  sdp_cli_case(model_spec_not_llama FAILS
               "model_type \"gpt2\" is not a LLaMA (valid: a Hugging Face LlamaForCausalLM"
               ${SDP_TRAIN} --model config:${SDP_CLI_WORK}/spec_gpt2_config.json --steps 1)
  sdp_cli_case(model_spec_flag_on_config FAILS "--vocab-size: model 'config:"
               ${SDP_TRAIN} --model config:${SDP_CLI_WORK}/spec_llama_config.json
               --vocab-size 512 --steps 1)
  sdp_cli_case(model_spec_named_vocab_too_small FAILS
               "has vocabulary 300 but model tiny has only 256 embeddings (valid: a model with at least 300, e.g. --model tiny --vocab-size 300)"
               ${SDP_TRAIN} --model tiny ${_run})
  sdp_cli_case(model_spec_vocab_too_small FAILS
               "has vocabulary 300 but model tiny:vocab=280 has only 280 embeddings"
               ${SDP_TRAIN} --model tiny:vocab=280 ${_run})
  sdp_cli_case(model_spec_config_vocab_too_small FAILS
               "has vocabulary 1000 but model custom has only 300 embeddings"
               ${SDP_TRAIN} --model config:${SDP_CLI_WORK}/spec_llama_config.json
               --data synthetic:vocab=1000 --steps 1 --batch 2 --seq 16)
endif()
